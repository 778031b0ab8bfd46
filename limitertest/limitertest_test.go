package limitertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/limitertest"
	"github.com/quotagate/limiter/strategy"
)

// TestNew: a window's quota is used up, the clock moves past it, and the
// quota is back; the key expired with the clock.
func TestNew(t *testing.T) {
	lim, clock := limitertest.New(t, strategy.NewFixedWindow())
	ctx := context.Background()
	l := limiter.PerMinute(2)
	for i := range 3 {
		if r, err := lim.Allow(ctx, "u", l); err != nil || r.Allowed != (i < 2) {
			t.Fatalf("call %d: %+v, %v", i, r, err)
		}
	}
	if keys := clock.Server().Keys(); len(keys) != 1 {
		t.Fatalf("keys %q", keys)
	}
	start := clock.Now()
	clock.Advance(time.Minute)
	if got := clock.Now().Sub(start); got != time.Minute {
		t.Errorf("clock moved %s", got)
	}
	if keys := clock.Server().Keys(); len(keys) != 0 {
		t.Errorf("keys %q outlived their window", keys)
	}
	if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed {
		t.Fatalf("after a minute: %+v, %v", r, err)
	}
}

// TestWaitOnTheClock: Wait advances the clock by the denial's RetryAfter
// (plus at most 1 ms of jitter) instead of sleeping.
func TestWaitOnTheClock(t *testing.T) {
	lim, clock := limitertest.New(t, strategy.NewGCRA())
	l := limiter.Per(1, time.Hour)
	if r, err := lim.Allow(context.Background(), "u", l); err != nil || !r.Allowed {
		t.Fatal(r, err)
	}
	// No deadline (Wait would refuse a wait longer than it): a cancel
	// after 30 s of real time, so that a sleep that does not move the
	// clock fails here rather than spinning until go test's timeout.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(30*time.Second, cancel)
	start, wall := clock.Now(), time.Now()
	r, err := lim.Wait(ctx, "u", l)
	if err != nil || !r.Allowed {
		t.Fatalf("Wait = %+v, %v; the test clock moved %s; want Allowed after it moved 1h", r, err, clock.Now().Sub(start))
	}
	if moved := clock.Now().Sub(start); moved < time.Hour || moved > time.Hour+time.Millisecond {
		t.Errorf("the clock moved %s, want 1h (+ at most 1ms)", moved)
	}
	if took := time.Since(wall); took > 10*time.Second {
		t.Errorf("Wait took %s of real time", took)
	}
}

// TestStoreShared: one embedded server for a Concurrency.
func TestStoreShared(t *testing.T) {
	st, clock := limitertest.Store(t)
	conc, err := limiter.NewConcurrency(st, strategy.NewConcurrency())
	if err != nil {
		t.Fatal(err)
	}
	f := limiter.InFlight{Max: 1, TTL: time.Second}
	ctx := context.Background()
	if l, err := conc.Acquire(ctx, "u", f); err != nil || !l.Held {
		t.Fatal(l, err)
	}
	if l, err := conc.Acquire(ctx, "u", f); err != nil || l.Held {
		t.Fatalf("second lease of 1: %v, %v", l.Held, err)
	}
	clock.Advance(time.Second)
	if l, err := conc.Acquire(ctx, "u", f); err != nil || !l.Held {
		t.Fatalf("after the first lease's TTL: %v, %v", l.Held, err)
	}
}
