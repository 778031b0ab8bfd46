package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestFailClosedRetryAfter: with Redis gone, a FailClosed denial's
// RetryAfter is the limit's Period (a Concurrency's TTL), at most a
// second, as FailClosed and Acquire document.
func TestFailClosedRetryAfter(t *testing.T) {
	st := goneStore(t)
	ctx := context.Background()

	lim := newLimiter(t, st, limiter.WithFailMode(limiter.FailClosed))
	for _, tc := range []struct {
		l    limiter.Limit
		want time.Duration
	}{
		{limiter.Per(3, 300*time.Millisecond), 300 * time.Millisecond},
		{limiter.PerSecond(5), time.Second},
		{limiter.PerHour(5), time.Second},
	} {
		r, err := lim.Allow(ctx, "k", tc.l)
		if err != nil || r.Allowed || !r.Degraded || r.RetryAfter != tc.want {
			t.Errorf("FailClosed Allow(%v) = %+v, %v; want a degraded denial with RetryAfter %v", tc.l, r, err, tc.want)
		}
	}

	c, err := limiter.NewConcurrency(st, strategy.NewConcurrency(), limiter.WithFailMode(limiter.FailClosed))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ttl, want time.Duration
	}{
		{200 * time.Millisecond, 200 * time.Millisecond},
		{time.Second, time.Second},
		{time.Hour, time.Second},
	} {
		l, err := c.Acquire(ctx, "u", limiter.InFlight{Max: 2, TTL: tc.ttl})
		if err != nil || l.Held || !l.Degraded || l.RetryAfter != tc.want {
			t.Errorf("FailClosed Acquire(TTL %v) = %+v, %v; want a degraded refusal with RetryAfter %v", tc.ttl, l, err, tc.want)
		}
	}
}
