package limiter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/limitertest"
	"github.com/quotagate/limiter/strategy"
)

// TestWaitOutageSleepEndedWrapsCause: under FailClosed, a wait whose sleep
// after an outage is ended by ctx returns an error that wraps both ctx's
// error and the outage's, with the degraded denial.
func TestWaitOutageSleepEndedWrapsCause(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sleep := limiter.WithSleep(func(ctx context.Context, d time.Duration) error {
		cancel()
		return ctx.Err()
	})
	lim, clock := limitertest.New(t, strategy.NewFixedWindow(), limiter.WithFailMode(limiter.FailClosed), sleep)
	clock.Server().Close()
	r, err := lim.Wait(ctx, "u", limiter.PerMinute(1))
	if !r.Degraded || r.Cause == nil || !errors.Is(err, context.Canceled) || !errors.Is(err, r.Cause) {
		t.Errorf("Wait = %+v, %v; want the degraded denial and an error wrapping context.Canceled and its Cause", r, err)
	}
}

// TestWaitOutagePauseRestarts: the pause after a try Redis does not decide
// doubles over such tries in a row, and starts again from the limit's
// after a try Redis decides: outage, outage, a denial Redis made (the
// quota taken meanwhile), outage: 100, 200, 100 ms (to the limit's
// RetryAfter), 100 ms, each with at most a millisecond of jitter.
func TestWaitOutagePauseRestarts(t *testing.T) {
	var clock *limitertest.Clock
	var lim *limiter.Limiter
	var sleeps []time.Duration
	l := limiter.Per(1, 100*time.Millisecond)
	sleep := limiter.WithSleep(func(ctx context.Context, d time.Duration) error {
		sleeps = append(sleeps, d)
		clock.Advance(d)
		switch len(sleeps) {
		case 2: // Redis back, and the quota taken by another caller
			if err := clock.Server().Restart(); err != nil {
				return err
			}
			if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed {
				t.Errorf("another caller's Allow once Redis is back = %+v, %v; want admitted", r, err)
			}
		case 3: // Redis down again
			clock.Server().Close()
		case 4:
			return clock.Server().Restart()
		}
		return nil
	})
	lim, clock = limitertest.New(t, strategy.NewFixedWindow(), limiter.WithFailMode(limiter.FailClosed), sleep)
	clock.Server().Close()
	if r, err := lim.Wait(context.Background(), "u", l); err != nil || !r.Allowed {
		t.Fatalf("Wait = %+v, %v; want admitted once Redis is back", r, err)
	}
	if len(sleeps) != 4 {
		t.Fatalf("sleeps %v; want 4", sleeps)
	}
	for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 0, 100 * time.Millisecond} {
		if s := sleeps[i]; want > 0 && (s < want || s > want+time.Millisecond) {
			t.Errorf("sleep %d of %v: %s, want %s (+ up to 1ms of jitter)", i+1, sleeps, s, want)
		}
	}
}
