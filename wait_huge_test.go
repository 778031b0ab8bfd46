package limiter_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// denyingFor is a strategy of a user's own that denies every request
// with a RetryAfter of retry (Degraded when degraded).
type denyingFor struct {
	retry    time.Duration
	degraded bool
}

func (s denyingFor) Decide(context.Context, store.Store, limiter.Request) (limiter.Result, error) {
	return limiter.Result{RetryAfter: s.retry, Degraded: s.degraded}, nil
}

// TestWaitHugeRetryAfter: a RetryAfter near the largest Duration (a
// strategy of the user's own may give any) is slept as a long sleep, never
// a negative one: the jitter added to it overflowed, and Wait tried again
// at once, about 19 000 times in 100 ms; a Degraded one's pause was
// doubled into an overflow too.
func TestWaitHugeRetryAfter(t *testing.T) {
	for _, degraded := range []bool{false, true} {
		_, st := newMini(t)
		var slept []time.Duration
		stop := errors.New("stop")
		lim, err := limiter.New(st, denyingFor{math.MaxInt64, degraded}, limiter.WithSleep(func(_ context.Context, d time.Duration) error {
			if slept = append(slept, d); len(slept) == 3 {
				return stop
			}
			return nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lim.Wait(context.Background(), "k", limiter.PerSecond(1)); !errors.Is(err, stop) {
			t.Errorf("degraded %v: Wait = %v; want the sleep's error", degraded, err)
		}
		for _, d := range slept {
			if d < time.Second {
				t.Errorf("degraded %v: slept %v for a RetryAfter of %v (all: %v); want a long sleep", degraded, d, time.Duration(math.MaxInt64), slept)
			}
		}
	}
}
