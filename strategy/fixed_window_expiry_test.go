package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/strategy"
)

// TestFixedWindowRetryAfterExact: Redis keeps a key through the
// millisecond its expiry names (PTTL 0); that millisecond is the next
// window's. A denial's RetryAfter is the counter's PTTL, and a call made
// that much later lands in it (miniredis shows it at a fraction of a
// millisecond: here 0.6 ms before the expiry, PTTL 0): it
// is admitted, as the first of a new window of the full rate (it was
// counted in the window that had ended and denied again, RetryAfter 1 ms).
// FixedWindow with one limit and with two, AllowMany, and Optimistic.
func TestFixedWindowRetryAfterExact(t *testing.T) {
	for _, tc := range expiryCases() {
		m, allow := tc.start(t)
		m.Advance(500 * time.Microsecond) // the counter expires at 1000.5 ms
		for range 3 {
			if r, err := allow(); err != nil || !r.Allowed {
				t.Fatalf("%s: %+v, %v", tc.name, r, err)
			}
		}
		// 699.6 ms left: PTTL and RetryAfter 699, and 0.6 ms are left then
		m.Advance(300*time.Millisecond + 400*time.Microsecond)
		r, err := allow()
		if err != nil || r.Allowed || r.RetryAfter != 699*time.Millisecond {
			t.Fatalf("%s: the 4th call = %+v, %v; want denied, RetryAfter 699ms", tc.name, r, err)
		}
		m.Advance(r.RetryAfter)
		if r, err := allow(); err != nil || !r.Allowed || r.Remaining != 2 || r.ResetAfter != time.Second {
			t.Errorf("%s: RetryAfter later (the old counter's PTTL 0) = %+v, %v; want admitted, the first of a new window (2 left, reset in 1s)", tc.name, r, err)
		}
	}
}

// expiryCase is a strategy asked for 3/s (and 1000/h beside it) by Allow
// or AllowMany, on subject "x".
type expiryCase struct {
	name   string
	s      limiter.Strategy
	limits []limiter.Limit
	many   bool
}

// expiryCases are FixedWindow's paths (one limit, several that fit, the
// many-request script) and Optimistic.
func expiryCases() []expiryCase {
	l, other := limiter.PerSecond(3), limiter.PerHour(1000)
	return []expiryCase{
		{"FixedWindow, one limit", strategy.NewFixedWindow(), []limiter.Limit{l}, false},
		{"FixedWindow, two limits", strategy.NewFixedWindow(), []limiter.Limit{l, other}, false},
		{"FixedWindow, AllowMany", strategy.NewFixedWindow(), []limiter.Limit{l}, true},
		{"FixedWindow, two limits, AllowMany", strategy.NewFixedWindow(), []limiter.Limit{l, other}, true},
		{"Optimistic", strategy.NewOptimistic(), []limiter.Limit{l}, false},
	}
}

// start returns a fresh miniredis and the case's call on it.
func (tc expiryCase) start(t *testing.T) (*redistest.Mini, func() (limiter.Result, error)) {
	m, st := newMini(t)
	lim := newLim(t, st, tc.s)
	ctx := context.Background()
	return m, func() (limiter.Result, error) {
		if tc.many {
			a := lim.AllowMany(ctx, []limiter.Ask{{Key: "x", Limits: tc.limits}})[0]
			return a.Result, a.Err
		}
		return lim.Allow(ctx, "x", tc.limits...)
	}
}
