package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestOptimisticExpiryMillisecond: a counter's expiry millisecond (PTTL 0)
// is the next window's, for Optimistic as for FixedWindow: a full window
// found there does not deny for a whole Period, and a call then is the
// first of the new window (Remaining rate-1, ResetAfter one Period).
func TestOptimisticExpiryMillisecond(t *testing.T) {
	ctx := context.Background()
	t.Run("full", func(t *testing.T) {
		l := limiter.PerHour(1)
		m, st := newMini(t)
		lim := newLim(t, st, strategy.NewOptimistic())
		m.Advance(500 * time.Microsecond) // the counter expires at 1h + 0.5 ms
		if r, err := lim.Allow(ctx, "x", l); err != nil || !r.Allowed {
			t.Fatalf("first call = %+v, %v", r, err)
		}
		m.Advance(time.Hour - 400*time.Microsecond) // PTTL 0
		r, err := lim.Allow(ctx, "x", l)
		if err != nil || !r.Allowed || r.Remaining != 0 || r.ResetAfter != time.Hour {
			t.Errorf("a full window at its counter's PTTL 0 = %+v, %v; want admitted, the first of a new window (0 left, reset in 1h)", r, err)
		}
	})
	t.Run("not full", func(t *testing.T) {
		l := limiter.PerSecond(3)
		m, st := newMini(t)
		lim := newLim(t, st, strategy.NewOptimistic())
		m.Advance(500 * time.Microsecond)
		if r, err := lim.Allow(ctx, "x", l); err != nil || !r.Allowed || r.Remaining != 2 {
			t.Fatalf("first call = %+v, %v", r, err)
		}
		m.Advance(999*time.Millisecond + 600*time.Microsecond) // PTTL 0
		r, err := lim.Allow(ctx, "x", l)
		if err != nil || !r.Allowed || r.Remaining != 2 || r.ResetAfter != time.Second {
			t.Errorf("at the old counter's PTTL 0 = %+v, %v; want admitted, the first of a new window (2 left, reset in 1s)", r, err)
		}
		m.Advance(time.Millisecond)
		for i := range 2 {
			if r, err := lim.Allow(ctx, "x", l); err != nil || !r.Allowed {
				t.Errorf("call %d of the new window = %+v, %v; want admitted", i+2, r, err)
			}
		}
		if r, err := lim.Allow(ctx, "x", l); err != nil || r.Allowed {
			t.Errorf("the 4th call of the new window = %+v, %v; want denied (rate 3)", r, err)
		}
	})
}
