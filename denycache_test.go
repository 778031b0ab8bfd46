package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/limitertest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// evalCounter counts the scripts a store runs.
type evalCounter struct {
	store.Store
	n atomic.Int64
}

func (c *evalCounter) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	c.n.Add(1)
	return c.Store.EvalSha(ctx, sha, keys, args)
}

func (c *evalCounter) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	c.n.Add(1)
	return c.Store.Eval(ctx, src, keys, args)
}

// TestDenyCache: after Redis denies a hot subject, the same request is
// denied locally until its RetryAfter ends, without a round trip, with a
// RetryAfter counting down to the same instant; another cost, another
// subject or other limits still go to Redis; Reset forgets; bad input is
// still refused first.
func TestDenyCache(t *testing.T) {
	_, st := newMiniFastFail(t)
	ec := &evalCounter{Store: st}
	lim, err := limiter.New(ec, strategy.NewFixedWindow(), limiter.WithDenyCache(16))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l := limiter.PerMinute(2)
	for i := range 3 {
		if r, err := lim.Allow(ctx, "hot", l); err != nil || r.Allowed != (i < 2) || r.Cached {
			t.Fatalf("call %d: %+v, %v", i, r, err)
		}
	}
	before := ec.n.Load()
	var last time.Duration = time.Hour
	for i := range 100 {
		r, err := lim.Allow(ctx, "hot", l)
		if err != nil || r.Allowed || !r.Cached || r.RetryAfter <= 0 || r.RetryAfter > last || r.Limit != l {
			t.Fatalf("cached call %d: %+v, %v", i, r, err)
		}
		last = r.RetryAfter
	}
	if n := ec.n.Load() - before; n != 0 {
		t.Errorf("100 calls of a denied subject ran %d scripts, want 0", n)
	}
	if r, err := lim.Peek(ctx, "hot", l); err != nil || r.Allowed || !r.Cached {
		t.Errorf("Peek of the denied subject: %+v, %v; want a cached denial", r, err)
	}
	for _, call := range []func() (limiter.Result, error){
		func() (limiter.Result, error) { return lim.AllowN(ctx, "hot", 0, l) },
		func() (limiter.Result, error) { return lim.Allow(ctx, "cold", l) },
		func() (limiter.Result, error) { return lim.Allow(ctx, "hot", limiter.PerMinute(5)) },
	} {
		n := ec.n.Load()
		if r, err := call(); err != nil || r.Cached {
			t.Errorf("%+v, %v: want Redis's answer", r, err)
		}
		if ec.n.Load() == n {
			t.Errorf("a different request did not reach Redis")
		}
	}
	if _, err := lim.Allow(ctx, "", l); !errors.Is(err, limiter.ErrInvalidKey) {
		t.Errorf("empty key: %v", err)
	}
	if err := lim.Reset(ctx, "hot", l); err != nil {
		t.Fatal(err)
	}
	if r, err := lim.Allow(ctx, "hot", l); err != nil || !r.Allowed || r.Cached {
		t.Errorf("after Reset: %+v, %v; want admitted by Redis", r, err)
	}
	if _, err := limiter.New(st, strategy.NewFixedWindow(), limiter.WithDenyCache(0)); !errors.Is(err, limiter.ErrInvalidOption) {
		t.Errorf("WithDenyCache(0): %v", err)
	}
}

// TestDenyCacheExpires: a remembered denial ends with its RetryAfter (on a
// real clock), and the next call goes to Redis.
func TestDenyCacheExpires(t *testing.T) {
	srv := realStore(t)
	lim, err := limiter.New(srv, strategy.NewGCRA(), limiter.WithDenyCache(4))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l := limiter.Per(1, 300*time.Millisecond)
	if r, err := lim.Allow(ctx, "g", l); err != nil || !r.Allowed {
		t.Fatal(r, err)
	}
	r, err := lim.Allow(ctx, "g", l)
	if err != nil || r.Allowed || r.Cached {
		t.Fatalf("second call: %+v, %v", r, err)
	}
	time.Sleep(r.RetryAfter + 5*time.Millisecond)
	if r, err := lim.Allow(ctx, "g", l); err != nil || !r.Allowed || r.Cached {
		t.Fatalf("after RetryAfter: %+v, %v; want admitted by Redis", r, err)
	}
}

// TestDenyCacheNeverAdmits: 8 callers hammer 4 subjects at 5 per 200 ms
// for a second on a real server, with the cache: every subject's admitted
// calls stay within the fixed windows' bound, as without it, and the cache
// answered most denials.
func TestDenyCacheNeverAdmits(t *testing.T) {
	srv := realStore(t)
	lim, err := limiter.New(srv, strategy.NewFixedWindow(), limiter.WithDenyCache(2))
	if err != nil {
		t.Fatal(err)
	}
	l := limiter.Per(5, 200*time.Millisecond)
	var admitted [4]atomic.Int64
	var cached, denied atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				s := (w + i) % 4
				r, err := lim.Allow(ctx, fmt.Sprintf("s%d", s), l)
				switch {
				case err != nil:
					continue // the test's deadline
				case r.Allowed:
					admitted[s].Add(1)
				default:
					denied.Add(1)
					if r.Cached {
						cached.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	bound := (int64(time.Since(start)/l.Period) + 2) * l.Rate
	for s := range admitted {
		if a := admitted[s].Load(); a > bound {
			t.Errorf("subject %d: %d admitted in %s at %s, above the fixed windows' bound %d", s, a, time.Since(start), l, bound)
		}
	}
	if cached.Load() == 0 {
		t.Errorf("none of %d denials came from the cache", denied.Load())
	}
	t.Logf("%d denials, %d from the cache (a cache of 2 entries for 4 subjects)", denied.Load(), cached.Load())
}

// realStore starts a redis-server for the test and returns a store of it.
func realStore(t *testing.T) store.Store {
	t.Helper()
	return dialServer(t, redistest.StartServer(t).Addr())
}

// TestDenyCacheAllowManyClock: AllowMany remembers a denial on the
// Limiter's clock (WithClock), as Allow does: once that clock is past the
// window, Redis has no counter and both admit (a denial remembered on the
// wall clock was still answered from the cache, Cached, with 59 s to go).
func TestDenyCacheAllowManyClock(t *testing.T) {
	lim, clock := limitertest.New(t, strategy.NewFixedWindow(), limiter.WithDenyCache(16))
	ctx := context.Background()
	l := limiter.PerMinute(1)
	asks := []limiter.Ask{{Key: "u", Limits: []limiter.Limit{l}}}
	if a := lim.AllowMany(ctx, asks)[0]; a.Err != nil || !a.Result.Allowed {
		t.Fatalf("first ask: %+v; want admitted", a)
	}
	if a := lim.AllowMany(ctx, asks)[0]; a.Err != nil || a.Result.Allowed || a.Result.Cached {
		t.Fatalf("second ask: %+v; want denied by Redis", a)
	}
	if a := lim.AllowMany(ctx, asks)[0]; a.Err != nil || a.Result.Allowed || !a.Result.Cached {
		t.Fatalf("third ask: %+v; want denied from the cache", a)
	}
	clock.Advance(time.Minute)
	if a := lim.AllowMany(ctx, asks)[0]; a.Err != nil || !a.Result.Allowed || a.Result.Cached {
		t.Errorf("AllowMany a window later: %+v; want admitted by Redis", a)
	}
	if r, err := lim.Allow(ctx, "u", l); err != nil || r.Allowed || r.Cached {
		t.Errorf("Allow after it: %+v, %v; want denied by Redis (the window's one call was AllowMany's)", r, err)
	}
}

// TestDenyCacheRemembersNoPeek: a Peek's denial is not remembered for the
// calls that write. A Peek reports the state as it is, which after a rule
// change (a named limit's period shortened from a day to a minute) is the
// old rule's window, a day long, while the next writing call repairs it
// to the new rule; remembered, that denial held the subject's Allow calls
// for the day (the deny cache would have answered them all).
func TestDenyCacheRemembersNoPeek(t *testing.T) {
	ctx := context.Background()
	was := limiter.Limit{Rate: 2, Period: 24 * time.Hour, Name: "api"}
	now := limiter.Limit{Rate: 2, Period: time.Minute, Name: "api"}
	for name, s := range map[string]limiter.Strategy{
		"FixedWindow": strategy.NewFixedWindow(), "Optimistic": strategy.NewOptimistic(), "GCRA": strategy.NewGCRA(),
		"TokenBucket": strategy.NewTokenBucket(), "SlidingWindow": strategy.NewSlidingWindow(),
	} {
		t.Run(name, func(t *testing.T) {
			lim, clock := limitertest.New(t, s, limiter.WithDenyCache(16))
			for range 2 {
				if r, err := lim.Allow(ctx, "u", was); err != nil || !r.Allowed {
					t.Fatalf("Allow at %s = %+v, %v; want admitted", was, r, err)
				}
			}
			clock.Advance(time.Second)
			p, err := lim.Peek(ctx, "u", now)
			if err != nil || p.Allowed || p.RetryAfter < time.Hour {
				t.Fatalf("Peek at %s = %+v, %v; want denied for what is left of the old day-long window", now, p, err)
			}
			for waited := time.Duration(0); ; waited += 30 * time.Second {
				r, err := lim.Allow(ctx, "u", now)
				if err != nil {
					t.Fatal(err)
				}
				if r.Allowed {
					t.Logf("admitted %s after the Peek", waited)
					break
				}
				if r.RetryAfter > 2*now.Period || waited >= 3*time.Minute {
					t.Fatalf("Allow at %s, %s after a Peek that said %s: %+v; want the new rule's decisions (admitted within 2 of its periods), never the Peek's remembered denial", now, waited, p.RetryAfter, r)
				}
				clock.Advance(30 * time.Second)
			}
		})
	}
}
