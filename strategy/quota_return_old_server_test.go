package strategy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// TestQuotaReturnWithoutPexpiretime runs the quota-return script as a
// server before Redis 7.0 does (PEXPIRETIME unknown: the script's pcall of
// it fails), so that its TIME + PTTL path, which no server of the tests
// takes otherwise, reads the window's end as PEXPIRETIME does, to the
// millisecond, and gives units back to that window only. The clock is off
// a whole second (TIME's microseconds count).
func TestQuotaReturnWithoutPexpiretime(t *testing.T) {
	ctx := context.Background()
	m, st := newMini(t)
	src := strategy.QuotaReturnScript().Source()
	if strings.Count(src, "'PEXPIRETIME'") != 1 {
		t.Fatal("the script names PEXPIRETIME once, as 'PEXPIRETIME'")
	}
	old := store.NewScript(strings.Replace(src, "'PEXPIRETIME'", "'NOSUCHCOMMAND'", 1))
	m.Advance(1234567 * time.Microsecond)
	const key = "t:{s}:w"
	if err := m.Set(key, "5"); err != nil {
		t.Fatal(err)
	}
	m.SetTTL(key, time.Minute)
	want := m.Now().Add(time.Minute).UnixMilli()
	for name, sc := range map[string]*store.Script{"PEXPIRETIME": strategy.QuotaReturnScript(), "TIME+PTTL": old} {
		nums, err := sc.RunInt64s(ctx, st, []string{key}, []int64{0}, nil)
		if err != nil || len(nums) != 2 || nums[0] < want-1 || nums[0] > want+1 || nums[1] != time.Minute.Milliseconds() {
			t.Errorf("%s: window end = %v, %v; want {%d (±1), 60000}", name, nums, err, want)
		}
	}
	for _, tc := range []struct {
		units, end, ok int64
		count          string
	}{{1, want + 3, 0, "5"}, {1, want - 3, 0, "5"}, {6, want, 0, "5"}, {2, want, 1, "3"}} {
		nums, err := old.RunInt64s(ctx, st, []string{key}, []int64{1, tc.units, tc.end}, nil)
		v, _ := m.Get(key)
		if err != nil || len(nums) != 1 || nums[0] != tc.ok || v != tc.count {
			t.Errorf("TIME+PTTL: %d units back to the window ending at %d (it ends at %d) = %v, %v, count %s; want %d, count %s", tc.units, tc.end, want, nums, err, v, tc.ok, tc.count)
		}
	}
	// a counter without a TTL has no end
	if _, err := st.Do(ctx, store.Cmd{Name: "PERSIST", Args: []any{key}}); err != nil {
		t.Fatal(err)
	}
	if nums, err := old.RunInt64s(ctx, st, []string{key}, []int64{0}, nil); err != nil || len(nums) != 2 || nums[0] != 0 || nums[1] != -1 {
		t.Errorf("TIME+PTTL: window end of a counter without a TTL = %v, %v; want {0, -1}", nums, err)
	}
}
