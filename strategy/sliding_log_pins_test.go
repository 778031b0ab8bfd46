package strategy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestSlidingLogLengthenedPeriodTTLRoundsUp: a denial under a lengthened
// period keeps the log until its newest unit leaves the new window, to the
// microsecond: the key's expiry is rounded up, never down, so no unit is
// forgotten early (which would admit a second unit within one Period).
func TestSlidingLogLengthenedPeriodTTLRoundsUp(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewSlidingLog())
	ctx := context.Background()
	short := limiter.Per(1, time.Second).Named("q")
	long := limiter.Per(1, 2*time.Second).Named("q")
	if r, err := lim.Allow(ctx, "s", short); err != nil || !r.Allowed {
		t.Fatalf("first = %+v, %v", r, err)
	}
	m.Advance(100*time.Millisecond + 500*time.Microsecond)
	if r, err := lim.Allow(ctx, "s", long); err != nil || r.Allowed {
		t.Fatalf("under the 2s rule = %+v, %v; want denied", r, err)
	}
	// the unit came in at 0 and leaves the 2s window at 2s
	m.Advance(2*time.Second - 100*time.Millisecond - 500*time.Microsecond - 300*time.Microsecond) // 1999.7 ms
	if r, err := lim.Allow(ctx, "s", long); err != nil || r.Allowed {
		t.Fatalf("at 1999.7 ms under 1/2s = %+v, %v; want denied (the unit of 0 ms is still in the window)", r, err)
	}
}

// TestSlidingLogMaxRateIsREADMEs: README: "rates up to 10 000 per window
// (SlidingLogMaxRate)"; 10 001 is ErrInvalidLimit.
func TestSlidingLogMaxRateIsREADMEs(t *testing.T) {
	_, st := newMini(t)
	lim := newLim(t, st, strategy.NewSlidingLog())
	if _, err := lim.Allow(context.Background(), "s", limiter.PerSecond(10_001)); !errors.Is(err, limiter.ErrInvalidLimit) {
		t.Errorf("10 001/s: %v; want ErrInvalidLimit", err)
	}
	if _, err := lim.Allow(context.Background(), "s", limiter.PerSecond(10_000)); err != nil {
		t.Errorf("10 000/s: %v; want nil", err)
	}
}
