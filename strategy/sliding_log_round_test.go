package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestSlidingLogRoundsUpSubMillisecond: a unit that leaves the window
// 1 ms + 1 µs from now is RetryAfter and ResetAfter 2 ms (rounded up), not
// 1 ms: a client that waits 1 ms is denied again.
func TestSlidingLogRoundsUpSubMillisecond(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewSlidingLog())
	ctx := context.Background()
	l := limiter.PerSecond(1)
	if r, err := lim.Allow(ctx, "s", l); err != nil || !r.Allowed {
		t.Fatalf("first = %+v, %v", r, err)
	}
	m.Advance(time.Second - time.Millisecond - time.Microsecond) // unit leaves in 1001 µs
	for _, peek := range []bool{true, false} {
		var r limiter.Result
		var err error
		if peek {
			r, err = lim.Peek(ctx, "s", l)
		} else {
			r, err = lim.Allow(ctx, "s", l)
		}
		if err != nil || r.Allowed || r.RetryAfter != 2*time.Millisecond || r.ResetAfter != 2*time.Millisecond {
			t.Errorf("peek=%v 1001 µs before the unit leaves: %+v, %v; want denied, RetryAfter = ResetAfter = 2ms", peek, r, err)
		}
	}
	m.Advance(time.Millisecond) // what a 1 ms RetryAfter would have told
	if r, err := lim.Allow(ctx, "s", l); err != nil || r.Allowed {
		t.Fatalf("1 µs before the unit leaves: %+v, %v; want denied", r, err)
	}
	m.Advance(time.Microsecond)
	if r, err := lim.Allow(ctx, "s", l); err != nil || !r.Allowed {
		t.Fatalf("when the unit leaves: %+v, %v; want admitted", r, err)
	}
}
