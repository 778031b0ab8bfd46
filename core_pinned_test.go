package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/limitertest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// README: "once Redis denies a request with RetryAfter R, the same request
// within R is denied locally with Result.Cached set".
func TestDenyCacheWholeRetryAfter(t *testing.T) {
	lim, clock := limitertest.New(t, strategy.NewFixedWindow(), limiter.WithDenyCache(16))
	ctx := context.Background()
	l := limiter.PerMinute(1)
	if r, err := lim.Allow(ctx, "s", l); err != nil || !r.Allowed {
		t.Fatal(r, err)
	}
	r, err := lim.Allow(ctx, "s", l)
	if err != nil || r.Allowed || r.Cached {
		t.Fatal(r, err)
	}
	R := r.RetryAfter
	clock.Advance(R - time.Millisecond) // still within R
	r2, err := lim.Allow(ctx, "s", l)
	if err != nil || r2.Allowed || !r2.Cached {
		t.Fatalf("1 ms before RetryAfter %s ends: %+v, %v; want a cached denial", R, r2, err)
	}
}

// README: a leased unit "is admitted only before its window ends".
func TestLeaseNotAfterItsWindow(t *testing.T) {
	st, clock := limitertest.Store(t)
	ctx := context.Background()
	lim, err := limiter.New(st, strategy.NewFixedWindow(), limiter.WithQuotaLease(10), limiter.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := limiter.New(st, strategy.NewFixedWindow()) // another process, no leases
	l := limiter.PerMinute(20)
	for i := range 9 { // a lease of 10 counted in window W1 [0s, 60s); 1 unit left
		if r, err := lim.Allow(ctx, "s", l); err != nil || !r.Allowed {
			t.Fatal(i, r, err)
		}
	}
	clock.Advance(10 * time.Second)
	clock.Server().Del("limiter:{s}:60000ms")                              // W1's counter evicted
	if r, err := other.AllowN(ctx, "s", 15, l); err != nil || !r.Allowed { // W2 [10s, 70s)
		t.Fatal(r, err)
	}
	// cost 2 > the 1 unit left: a new lease of 10 does not fit (15+10 > 20),
	// the call goes to Redis
	if r, err := lim.AllowN(ctx, "s", 2, l); err != nil || !r.Allowed || r.Leased {
		t.Fatal(r, err)
	}
	clock.Advance(51 * time.Second) // t = 61s: W1, where the unit was counted, is over
	r, err := lim.Allow(ctx, "s", l)
	if err != nil {
		t.Fatal(err)
	}
	if r.Leased {
		t.Fatalf("at 61s, after the lease's window ended at 60s: %+v; a leased unit of W1 admitted after W1 ended", r)
	}
}

type clockJumpReply struct {
	store.Store
	clock *limitertest.Clock
	n     int
}

func (s *clockJumpReply) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	v, err := s.Store.EvalSha(ctx, sha, keys, args)
	if err == nil {
		s.n++
	}
	if err == nil && s.n == 1 {
		s.clock.Advance(time.Second) // the reply takes a second to come back
	}
	return v, err
}

func (s *clockJumpReply) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	v, err := s.Store.Eval(ctx, src, keys, args)
	if err == nil {
		s.n++
	}
	if err == nil && s.n == 1 {
		s.clock.Advance(time.Second)
	}
	return v, err
}

// README: a leased unit is "admitted only before its window ends (measured
// from before the lease's request left, so earlier than the server's end)".
func TestLeaseEndFromSending(t *testing.T) {
	st0, clock := limitertest.Store(t)
	st := &clockJumpReply{Store: st0, clock: clock}
	ctx := context.Background()
	lim, err := limiter.New(st, strategy.NewFixedWindow(), limiter.WithQuotaLease(10), limiter.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	l := limiter.PerMinute(20)
	// sent at 0s, counted at 0s in the window [0s, 60s), answered at 1s
	if r, err := lim.Allow(ctx, "s", l); err != nil || !r.Allowed || !r.Leased {
		t.Fatal(r, err)
	}
	clock.Advance(59*time.Second + 500*time.Millisecond) // 60.5s: the window is over
	r, err := lim.Allow(ctx, "s", l)
	if err != nil || !r.Allowed {
		t.Fatal(r, err)
	}
	if v, err := clock.Server().Get("limiter:{s}:60000ms"); err != nil || v != "10" {
		t.Fatalf("at 60.5s: %+v admitted, the counter reads %q (%v); want a new lease counted in the new window (10): a unit of the ended window was admitted", r, v, err)
	}
}

// godoc of failed/README: bad input is an error in every fail mode.
func TestBadLimitUnderFailOpen(t *testing.T) {
	lim, _ := limitertest.New(t, strategy.NewSlidingLog(), limiter.WithFailMode(limiter.FailOpen))
	r, err := lim.Allow(context.Background(), "s", limiter.PerMinute(strategy.SlidingLogMaxRate+1))
	if err == nil || r.Allowed {
		t.Fatalf("a limit SlidingLog cannot hold under FailOpen: %+v, %v; want ErrInvalidLimit", r, err)
	}
}

type causeDenier struct{ n int }

func (c *causeDenier) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	c.n++
	return limiter.Result{RetryAfter: time.Minute, Cause: strategy.ErrStaleWindow}, nil
}

// WithDenyCache godoc: a denial "with a Cause ... not at all" remembered.
func TestDenyCacheSkipsCause(t *testing.T) {
	st, _ := limitertest.Store(t)
	s := &causeDenier{}
	lim, err := limiter.New(st, s, limiter.WithDenyCache(8))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if r, err := lim.Allow(context.Background(), "s", limiter.PerMinute(1)); err != nil || r.Cached {
			t.Fatalf("%+v, %v: a denial with a Cause answered from the deny cache", r, err)
		}
	}
}

// README/godoc: Wait sleeps RetryAfter "plus a random jitter of at most a millisecond".
func TestWaitJitters(t *testing.T) {
	var sleeps []time.Duration
	stop := context.Canceled
	lim, _ := limitertest.New(t, strategy.NewFixedWindow(), limiter.WithSleep(func(ctx context.Context, d time.Duration) error {
		sleeps = append(sleeps, d)
		return stop
	}))
	ctx := context.Background()
	l := limiter.PerMinute(1)
	for i := range 20 {
		k := string(rune('a' + i))
		lim.Allow(ctx, k, l)
		lim.Wait(ctx, k, l)
	}
	for _, d := range sleeps[1:] {
		if d != sleeps[0] {
			return
		}
	}
	t.Fatalf("20 waits denied alike all slept exactly %s: no jitter", sleeps[0])
}
