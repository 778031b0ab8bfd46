package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestSlidingWindowKeyExpiringThisMillisecond: a call in the millisecond
// its key expires (PTTL 0, the key not yet gone, as Redis shows it) after
// a window that counted and one that did not finds the limit idle: its
// cost is the first of a new window, counted in full for that window's
// Period, so 10/s admits 10, then nothing 600 ms later; ResetAfter is 2 s.
// (The cost was written as the count of the window that had ended, weighed
// down as the previous one: 5 more admitted 600 ms later, 15 in a second.)
// The one-limit call, the general path (two limits) and AllowMany.
func TestSlidingWindowKeyExpiringThisMillisecond(t *testing.T) {
	l := limiter.PerSecond(10)
	other := limiter.PerHour(1000)
	for _, how := range []string{"one limit", "two limits", "AllowMany"} {
		m, st := newMini(t)
		lim := newLim(t, st, strategy.NewSlidingWindow())
		ctx := context.Background()
		limits := []limiter.Limit{l}
		if how == "two limits" {
			limits = append(limits, other)
		}
		allowN := func(n int64) (limiter.Result, error) {
			if how == "AllowMany" {
				a := lim.AllowMany(ctx, []limiter.Ask{{Key: "x", Cost: n, Limits: limits}})[0]
				return a.Result, a.Err
			}
			return lim.AllowN(ctx, "x", n, limits...)
		}
		if r, err := allowN(1); err != nil || !r.Allowed {
			t.Fatalf("%s: the first call: %+v, %v", how, r, err)
		}
		key, _ := limiter.Key("t", "x", l)
		m.Advance(1999*time.Millisecond + 500*time.Microsecond)
		if ttl := m.TTL(key); ttl != 0 && ttl >= time.Millisecond {
			t.Fatalf("%s: TTL %s before the call; want under a millisecond", how, ttl)
		}
		r, err := allowN(10)
		if err != nil || !r.Allowed || r.Remaining != 0 || r.ResetAfter != 2*time.Second {
			t.Errorf("%s: AllowN(10) in the key's expiry millisecond = %+v, %v; want admitted, 0 left, reset in 2s", how, r, err)
		}
		m.Advance(600 * time.Millisecond)
		if r, err := allowN(5); err != nil || r.Allowed {
			t.Errorf("%s: AllowN(5) 600 ms later = %+v, %v; want denied (10 of 10 in this window)", how, r, err)
		}
	}
}
