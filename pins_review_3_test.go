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

// TestWaitZeroRetryAfterSleepsAMillisecond: a strategy of the
// user's own that denies with a RetryAfter of 0 (Degraded or not) makes
// Wait sleep at least a millisecond between tries, never spin on Redis.
func TestWaitZeroRetryAfterSleepsAMillisecond(t *testing.T) {
	for _, degraded := range []bool{false, true} {
		_, st := newMini(t)
		var slept []time.Duration
		stop := errors.New("stop")
		lim, err := limiter.New(st, denyingFor{0, degraded}, limiter.WithSleep(func(_ context.Context, d time.Duration) error {
			if slept = append(slept, d); len(slept) == 5 {
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
			if d < time.Millisecond || d > 2*time.Second {
				t.Errorf("degraded %v: slept %v for a RetryAfter of 0 (all: %v); want at least 1ms", degraded, d, slept)
			}
		}
	}
}

// TestWaitTooLongJustShort: a RetryAfter that ends after ctx's
// deadline, even by less than a millisecond, returns ErrWaitTooLong at
// once, without sleeping (a sleep would only end at the deadline with
// ctx's error).
func TestWaitTooLongJustShort(t *testing.T) {
	_, st := newMini(t)
	const retry = 10 * time.Second
	slept := 0
	lim, err := limiter.New(st, denyingFor{retry, false}, limiter.WithSleep(func(context.Context, time.Duration) error {
		slept++
		return errors.New("slept")
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(retry-500*time.Microsecond))
	defer cancel()
	res, err := lim.Wait(ctx, "k", limiter.PerSecond(1))
	if !errors.Is(err, limiter.ErrWaitTooLong) || slept != 0 || res.RetryAfter != retry {
		t.Errorf("Wait = %+v, %v after %d sleeps; want the denial (RetryAfter %v), ErrWaitTooLong, no sleep", res, err, slept, retry)
	}
}

// TestWaitOutagePauseJitters: the pauses of Wait between tries that
// Redis did not decide (a Degraded denial) are jittered too, so that the
// waiters of an outage do not all retry a recovering Redis at the same
// instant: 20 waits, each on a fresh streak, do not all pause alike.
func TestWaitOutagePauseJitters(t *testing.T) {
	_, st := newMini(t)
	var sleeps []time.Duration
	lim, err := limiter.New(st, denyingFor{100 * time.Millisecond, true}, limiter.WithSleep(func(_ context.Context, d time.Duration) error {
		sleeps = append(sleeps, d)
		return context.Canceled
	}))
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		lim.Wait(context.Background(), "k", limiter.PerSecond(1))
	}
	if len(sleeps) != 20 {
		t.Fatalf("%d sleeps; want 20", len(sleeps))
	}
	for _, d := range sleeps {
		if d < 100*time.Millisecond || d > 101*time.Millisecond {
			t.Errorf("paused %v; want 100ms plus at most 1ms", d)
		}
		if d != sleeps[0] {
			return
		}
	}
	t.Fatalf("20 outage pauses all exactly %s: no jitter", sleeps[0])
}

// TestWithObserverCopiesIndependent: observers added by With to two
// copies of one Limiter (with three observers of its own) stay each
// copy's own: a call of one copy is told to its observer only, once.
func TestWithObserverCopiesIndependent(t *testing.T) {
	count := map[string]int{}
	obs := func(name string) limiter.Observer {
		return limiter.ObserverFuncs{Decision: func(context.Context, string, limiter.Result) { count[name]++ }}
	}
	base, _ := limitertest.New(t, strategy.NewFixedWindow(),
		limiter.WithObserver(obs("a")), limiter.WithObserver(obs("b")), limiter.WithObserver(obs("c")))
	x, err := base.With(limiter.WithObserver(obs("x")))
	if err != nil {
		t.Fatal(err)
	}
	y, err := base.With(limiter.WithObserver(obs("y")))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := x.Allow(ctx, "k", limiter.PerMinute(10)); err != nil {
		t.Fatal(err)
	}
	if count["x"] != 1 || count["y"] != 0 || count["a"] != 1 {
		t.Errorf("after a call of copy x: told %v; want a, b, c and x once, y never", count)
	}
	if _, err := y.Allow(ctx, "k", limiter.PerMinute(10)); err != nil {
		t.Fatal(err)
	}
	if count["x"] != 1 || count["y"] != 1 || count["a"] != 2 {
		t.Errorf("after a call of copy y: told %v; want a, b, c twice, x and y once", count)
	}
	if _, err := base.Allow(ctx, "k", limiter.PerMinute(10)); err != nil {
		t.Fatal(err)
	}
	if count["x"] != 1 || count["y"] != 1 || count["a"] != 3 || count["c"] != 3 {
		t.Errorf("after a call of base: told %v; want a, b, c thrice, x and y once", count)
	}
}
