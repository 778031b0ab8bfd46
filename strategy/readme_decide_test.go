package strategy

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// readmeSlidingWindow is the README's "Write your own strategy", step 3,
// SlidingWindow.Decide written out: keep the two in step.
type readmeSlidingWindow struct{}

func (readmeSlidingWindow) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	args := []int64{req.Cost, 0}
	if req.DryRun {
		args[1] = 1
	}
	for _, l := range req.Limits {
		rate, period, err := slidingWindowParams(l)
		if err != nil {
			return limiter.Result{}, err
		}
		args = append(args, rate, period)
	}
	nums, err := slidingWindowScript.RunInt64s(ctx, st, req.Keys, args, nil)
	if err != nil {
		return limiter.Result{}, fmt.Errorf("strategy: sliding window: %w", CounterError(err))
	}
	if len(nums) == 1 && len(req.Limits) == 1 && nums[0] >= 0 {
		m := req.Limits[0].Rate + 1 // one limit admitted: reset_ms·m + remaining
		nums = []int64{1, nums[0] % m, nums[0] / m, 0}
	}
	if len(nums) != 1+3*len(req.Limits) {
		return limiter.Result{}, fmt.Errorf("strategy: sliding window: %d values for %d limits", len(nums), len(req.Limits))
	}
	var b limiter.Binder
	for i := range req.Limits {
		retry := time.Duration(nums[3+3*i]) * time.Millisecond
		if nums[3+3*i] < 0 {
			retry = -1 // the cost never fits
		}
		b.Add(i, nums[1+3*i], time.Duration(nums[2+3*i])*time.Millisecond, retry)
	}
	return b.Result(nums[0] == 1), nil
}

// TestREADMEDecideWrittenOut: the README's written-out Decide decides what
// SlidingWindow.Decide decides, call by call (one limit and two, admitted,
// denied, a peek, a cost that never fits), on a clock that stands still.
func TestREADMEDecideWrittenOut(t *testing.T) {
	m := redistest.NewMini(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	readme, err := limiter.New(goredis.New(rdb), readmeSlidingWindow{}, limiter.WithPrefix("readme"))
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := limiter.New(goredis.New(rdb), NewSlidingWindow(), limiter.WithPrefix("shipped"))
	if err != nil {
		t.Fatal(err)
	}
	one, two := []limiter.Limit{limiter.PerSecond(3)}, []limiter.Limit{limiter.PerSecond(3), limiter.PerMinute(4)}
	calls := []struct {
		cost   int64
		peek   bool
		limits []limiter.Limit
	}{{1, false, one}, {2, false, one}, {1, false, one}, {1, true, one}, {5, false, one}, {1, false, two}, {1, false, two}, {1, true, two}}
	for i, c := range calls {
		decide := func(l *limiter.Limiter) (limiter.Result, error) {
			if c.peek {
				return l.Peek(ctx, "s", c.limits...)
			}
			return l.AllowN(ctx, "s", c.cost, c.limits...)
		}
		got, gerr := decide(readme)
		want, werr := decide(shipped)
		if gerr != nil || werr != nil || got != want {
			t.Errorf("call %d (cost %d, peek %v, %d limits): README's %+v, %v; shipped %+v, %v", i+1, c.cost, c.peek, len(c.limits), got, gerr, want, werr)
		}
	}
	// a counter that is not one (property 29): ErrCorruptCounter from both
	// (the README's wrapped the script's error plainly, an outage to
	// observers)
	for _, prefix := range []string{"readme", "shipped"} {
		key, _ := limiter.Key(prefix, "bad", one[0])
		if err := rdb.Set(ctx, key, "1.5", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for name, l := range map[string]*limiter.Limiter{"README's": readme, "shipped": shipped} {
		if _, err := l.Allow(ctx, "bad", one...); !errors.Is(err, limiter.ErrCorruptCounter) {
			t.Errorf("%s Decide on a counter holding 1.5: %v; want ErrCorruptCounter", name, err)
		}
	}
}
