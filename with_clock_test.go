package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/limitertest"
	"github.com/quotagate/limiter/strategy"
)

// TestWithPassesTheClockOn: New copies WithClock into the deny cache and
// the lease table after all options ran, but With does not, so
// lim.With(WithQuotaLease(n)) (or WithDenyCache) on a limitertest Limiter
// keeps the lease on the wall clock while Redis runs on the test clock
// (the case TestQuotaLeaseFollowsClock guards for New).
func TestWithPassesTheClockOn(t *testing.T) {
	base, clock := limitertest.New(t, strategy.NewFixedWindow())
	lim, err := base.With(limiter.WithQuotaLease(5))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l := limiter.PerMinute(10)
	if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed {
		t.Fatalf("first call: %+v, %v", r, err)
	}
	clock.Advance(time.Minute) // the window is over: a new one starts
	admitted := 0
	for range 30 {
		r, err := lim.Allow(ctx, "u", l)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			admitted++
		}
	}
	if admitted != 10 {
		t.Errorf("one window of the test clock admitted %d calls of a limit of 10 per minute", admitted)
	}
}
