package strategy

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/quotagate/limiter/store"
)

//go:embed lua/quota_return.lua
var quotaReturnLua string

var quotaReturnScript = store.NewScript(quotaReturnLua)

// QuotaReturnScript returns the script FixedWindow gives leased units back
// with (limiter.QuotaReturner), for tools that preload it (SCRIPT LOAD).
func QuotaReturnScript() *store.Script { return quotaReturnScript }

// WindowEnd implements limiter.QuotaReturner: the counter's expiry is its
// window's end.
func (FixedWindow) WindowEnd(ctx context.Context, st store.Store, key string) (int64, time.Duration, error) {
	return windowEnd(ctx, st, key)
}

// ReturnQuota implements limiter.QuotaReturner: units come off the counter
// only while its window is the one that ends at end.
func (FixedWindow) ReturnQuota(ctx context.Context, st store.Store, key string, units, end int64) (bool, error) {
	return returnQuota(ctx, st, key, units, end)
}

// windowEnd reads the end of the fixed window counted at key.
func windowEnd(ctx context.Context, st store.Store, key string) (int64, time.Duration, error) {
	var dst [2]int64
	nums, err := quotaReturnScript.RunInt64s(ctx, st, []string{key}, []int64{0}, dst[:0])
	if err != nil {
		return 0, 0, fmt.Errorf("strategy: window end: %w", err)
	}
	if len(nums) != 2 || nums[0] < 0 {
		return 0, 0, fmt.Errorf("strategy: window end: bad reply %v", nums)
	}
	if nums[0] == 0 || nums[1] < 0 {
		return 0, 0, nil
	}
	return nums[0], time.Duration(nums[1]) * time.Millisecond, nil
}

// returnQuota gives units back to the fixed window counted at key that
// ends at end, if it still does.
func returnQuota(ctx context.Context, st store.Store, key string, units, end int64) (bool, error) {
	if units <= 0 || end <= 0 {
		return false, nil
	}
	var dst [1]int64
	nums, err := quotaReturnScript.RunInt64s(ctx, st, []string{key}, []int64{1, units, end}, dst[:0])
	if err != nil {
		return false, fmt.Errorf("strategy: quota return: %w", corruptErr(err))
	}
	if len(nums) != 1 {
		return false, fmt.Errorf("strategy: quota return: bad reply %v", nums)
	}
	return nums[0] == 1, nil
}
