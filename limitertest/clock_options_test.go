package limitertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/limitertest"
	"github.com/quotagate/limiter/strategy"
)

// TestDenyCacheFollowsClock: the deny cache measures a cached denial on
// the Clock the test moves. After clock.Advance past the window the call
// goes to the embedded Redis, which admits; on the wall clock the cache
// denied it (Cached, RetryAfter a minute).
func TestDenyCacheFollowsClock(t *testing.T) {
	lim, clock := limitertest.New(t, strategy.NewFixedWindow(), limiter.WithDenyCache(16))
	ctx := context.Background()
	l := limiter.PerMinute(1)
	if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed {
		t.Fatalf("first call: %+v, %v", r, err)
	}
	if r, err := lim.Allow(ctx, "u", l); err != nil || r.Allowed {
		t.Fatalf("second call: %+v, %v", r, err)
	}
	clock.Advance(time.Minute) // the window is over
	if keys := clock.Server().Keys(); len(keys) != 0 {
		t.Fatalf("keys %q outlived their window", keys)
	}
	r, err := lim.Allow(ctx, "u", l)
	if err != nil || !r.Allowed {
		t.Errorf("after clock.Advance(1m): Allowed=%v Cached=%v RetryAfter=%s err=%v; want Allowed (the window is over on the test clock)", r.Allowed, r.Cached, r.RetryAfter, err)
	}
}

// TestQuotaLeaseFollowsClock: a quota lease ends with its window on the
// Clock the test moves. On the wall clock, after clock.Advance into the
// next window the lease's leftover units (counted in the old window)
// admitted on top of the new window's full quota: 14 of a Rate of 10.
func TestQuotaLeaseFollowsClock(t *testing.T) {
	lim, clock := limitertest.New(t, strategy.NewFixedWindow(), limiter.WithQuotaLease(5))
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

// TestWaitWithDenyCacheOnClock: Wait sleeps by advancing the test clock,
// and the deny cache counts on that clock, so Wait returns after one
// sleep. On the wall clock every retry was denied again from the cache:
// Wait spun, moving the test clock by an hour per turn, until its context
// ended.
func TestWaitWithDenyCacheOnClock(t *testing.T) {
	lim, clock := limitertest.New(t, strategy.NewGCRA(), limiter.WithDenyCache(16))
	l := limiter.Per(1, time.Hour)
	if r, err := lim.Allow(context.Background(), "u", l); err != nil || !r.Allowed {
		t.Fatal(r, err)
	}
	start := clock.Now()
	// No deadline (Wait would refuse a wait longer than it): a cancel
	// after 2 s of real time.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(2*time.Second, cancel)
	r, err := lim.Wait(ctx, "u", l)
	if err != nil || !r.Allowed {
		t.Errorf("Wait = Allowed %v, %v; the test clock moved %s; want Allowed after the clock moved 1h", r.Allowed, err, clock.Now().Sub(start))
	}
}

// TestAppClockStrategiesFollowClock: AlignedWindow and Bucketed, which name
// their windows from the app's clock, read the test Clock under New: after
// clock.Advance within a window the reset is the server's (19 s), and with
// quota leases a window admits its rate (on the wall clock AlignedWindow
// reported 59 s to go, its leases outlived the server's window, and 14 of
// 10 were admitted in one). A strategy given to New before, which decided
// nothing there (a table-driven test's shared value), reads the last New's
// clock (AlignedWindow kept the first's).
func TestAppClockStrategiesFollowClock(t *testing.T) {
	l := limiter.PerMinute(10)
	for _, s := range []func() limiter.Strategy{
		func() limiter.Strategy { return strategy.NewAlignedWindow() },
		func() limiter.Strategy { return strategy.NewBucketed() },
	} {
		ctx := context.Background()
		shared := s()
		limitertest.New(t, shared) // another test's, deciding nothing
		lim, clock := limitertest.New(t, shared, limiter.WithQuotaLease(5))
		// 1 s into a minute (the windows are the epoch's minutes)
		clock.Advance(clock.Now().Truncate(time.Minute).Add(time.Minute + time.Second).Sub(clock.Now()))
		for range 5 { // a lease of 5, used up
			if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed {
				t.Fatalf("%T: %+v, %v", shared, r, err)
			}
		}
		clock.Advance(40 * time.Second)
		r, err := lim.Allow(ctx, "u", l) // a second lease
		if err != nil || !r.Allowed || r.ResetAfter > 19*time.Second {
			t.Errorf("%T: 41 s into the window: %+v, %v; want admitted, the window's end in at most 19 s", shared, r, err)
		}
		clock.Advance(20 * time.Second) // the next window
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
			t.Errorf("%T: one window of the test clock admitted %d of a limit of 10 per minute", shared, admitted)
		}
	}
}

// TestClockStartsOnASecondMovesForwardOnly: the clock starts at the
// current second of the wall clock, and Advance moves it forward only (a
// negative or zero d leaves it).
func TestClockStartsOnASecondMovesForwardOnly(t *testing.T) {
	_, clock := limitertest.Store(t)
	start := clock.Now()
	if since := time.Since(start); start.Nanosecond() != 0 || since < 0 || since > 2*time.Second {
		t.Errorf("the clock starts at %s (wall clock %s); want the current second", start, time.Now())
	}
	clock.Advance(-time.Minute)
	clock.Advance(0)
	if got := clock.Now(); !got.Equal(start) {
		t.Errorf("Advance(-1m), Advance(0) moved the clock by %s", got.Sub(start))
	}
}
