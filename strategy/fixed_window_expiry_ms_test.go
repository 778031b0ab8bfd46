package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestFixedWindowExpiryMillisecondNotFull: a counter's expiry millisecond
// (PTTL 0) is the next window's, also when the window it ends is not full:
// a call then is the first of a new window of the full rate (Remaining
// rate-1, ResetAfter a period), and the new window admits the rate, no
// more. FixedWindow with one limit, with two (the path for several limits
// that fit) and through AllowMany, and Optimistic (TestFixedWindowRetryAfterExact
// does the same for a full window).
func TestWindowExpiryMillisecondNotFull(t *testing.T) {
	for _, tc := range expiryCases() {
		m, allow := tc.start(t)
		m.Advance(500 * time.Microsecond) // the counter expires at 1000.5 ms
		if r, err := allow(); err != nil || !r.Allowed || r.Remaining != 2 {
			t.Errorf("%s: the first call = %+v, %v", tc.name, r, err)
			continue
		}
		// 0.4 ms before the expiry: PTTL 0, the next window's millisecond
		m.Advance(999*time.Millisecond + 600*time.Microsecond)
		r, err := allow()
		if err != nil || !r.Allowed || r.Remaining != 2 || r.ResetAfter != time.Second {
			t.Errorf("%s: at the old counter's PTTL 0 = %+v, %v; want admitted, the first of a new window (2 left, reset in 1s)", tc.name, r, err)
			continue
		}
		m.Advance(time.Millisecond)
		for i := 0; i < 2; i++ {
			if r, err := allow(); err != nil || !r.Allowed {
				t.Errorf("%s: call %d of the new window = %+v, %v; want admitted", tc.name, i+2, r, err)
			}
		}
		if r, err := allow(); err != nil || r.Allowed {
			t.Errorf("%s: the 4th call in the new window = %+v, %v; want denied (rate 3)", tc.name, r, err)
		}
	}
}

// TestFixedWindowZeroCounterExpiryMillisecond: a counter at 0 (a quota
// lease given back whole leaves one) found in its expiry millisecond (PTTL
// 0) by a call with several limits is a valid counter: the call is
// admitted with a ResetAfter of at least a millisecond, not an error. By
// Allow and by AllowMany.
func TestFixedWindowZeroCounterExpiryMillisecond(t *testing.T) {
	l := limiter.PerSecond(3)
	other := limiter.PerHour(1000)
	for _, many := range []bool{false, true} {
		m, st := newMini(t)
		lim := newLim(t, st, strategy.NewFixedWindow())
		key, _ := limiter.Key("t", "x", l)
		if err := m.Set(key, "0"); err != nil {
			t.Fatal(err)
		}
		m.SetTTL(key, time.Second)
		m.Advance(999*time.Millisecond + 500*time.Microsecond) // PTTL 0
		var r limiter.Result
		var err error
		if many {
			a := lim.AllowMany(context.Background(), []limiter.Ask{{Key: "x", Limits: []limiter.Limit{l, other}}})[0]
			r, err = a.Result, a.Err
		} else {
			r, err = lim.Allow(context.Background(), "x", l, other)
		}
		if err != nil || !r.Allowed || r.ResetAfter <= 0 {
			t.Errorf("AllowMany=%v: a counter at 0 in its expiry millisecond: %+v, %v; want admitted, ResetAfter > 0", many, r, err)
		}
	}
}
