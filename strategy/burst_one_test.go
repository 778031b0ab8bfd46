package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestBurstOneIsOne: a Burst of 1 admits one unit at once, not Rate.
func TestBurstOneIsOne(t *testing.T) {
	for _, s := range []limiter.Strategy{strategy.NewGCRA(), strategy.NewTokenBucket()} {
		m, st := newMini(t)
		lim := newLim(t, st, s)
		ctx := context.Background()
		l := limiter.Limit{Rate: 10, Period: time.Second, Burst: 1}
		if r, err := lim.Allow(ctx, "one", l); err != nil || !r.Allowed || r.Remaining != 0 || r.ResetAfter != 100*time.Millisecond {
			t.Fatalf("%T first call: %+v, %v; want admitted, 0 remaining, full in 100ms", s, r, err)
		}
		if r, err := lim.Allow(ctx, "one", l); err != nil || r.Allowed || r.RetryAfter != 100*time.Millisecond {
			t.Fatalf("%T second call: %+v, %v; want denied, retry after 100ms", s, r, err)
		}
		if r, err := lim.AllowN(ctx, "one", 2, l); err != nil || r.Allowed || r.RetryAfter != -1 {
			t.Fatalf("%T cost 2 with burst 1: %+v, %v; want never (RetryAfter -1)", s, r, err)
		}
		m.Advance(100 * time.Millisecond)
		if r, err := lim.Allow(ctx, "one", l); err != nil || !r.Allowed {
			t.Fatalf("%T after 100ms: %+v, %v; want admitted", s, r, err)
		}
	}
}
