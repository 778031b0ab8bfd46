package limiter_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/limitertest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// TestLeaseOfAnotherFormNotUsed: a named limit's period changed and
// changed back in this process (a rules reload, then its revert). The
// shorter form counts in the same key and ends the window the lease of
// the first form was counted in; that lease must not admit after it: at
// one instant 10/min admits at most 10 (it admitted 14: 4 units of the old
// lease on top of a new window's 10).
func TestLeaseOfAnotherFormNotUsed(t *testing.T) {
	for name, mk := range map[string]func() limiter.Strategy{
		"FixedWindow": func() limiter.Strategy { return strategy.NewFixedWindow() },
		"Optimistic":  func() limiter.Strategy { return strategy.NewOptimistic() },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			perMin := limiter.Limit{Name: "q", Rate: 10, Period: time.Minute}
			perSec := limiter.Limit{Name: "q", Rate: 10, Period: time.Second}
			for _, many := range []bool{false, true} {
				lim, clock := limitertest.New(t, mk(), limiter.WithQuotaLease(5))
				if r, err := lim.Allow(ctx, "s", perMin); err != nil || !r.Allowed || !r.Leased {
					t.Fatalf("first call = %+v, %v; want admitted from a lease", r, err)
				}
				// the rule becomes 10/s: the key's window is cut to 1 s
				if many {
					if a := lim.AllowMany(ctx, []limiter.Ask{{Key: "s", Limits: []limiter.Limit{perSec}}}); a[0].Err != nil {
						t.Fatal(a[0].Err)
					}
				} else if _, err := lim.Allow(ctx, "s", perSec); err != nil {
					t.Fatal(err)
				}
				clock.Advance(2 * time.Second)
				// and back to 10/min
				if n := admitted(t, lim, 30, perMin); n > 10 {
					t.Errorf("AllowMany %t: %s admitted %d at one instant after the rule came back", many, perMin, n)
				}
			}
		})
	}
}

// TestDenyCacheOfAnotherFormNotUsed: a named limit's period changed and
// changed back in this process. The shorter form counts in the same key
// and ends the window of the first form's remembered denial; that denial
// must not be served after it (it was, for the rest of the old minute,
// although Redis would admit).
func TestDenyCacheOfAnotherFormNotUsed(t *testing.T) {
	for name, mk := range map[string]func() limiter.Strategy{
		"FixedWindow": func() limiter.Strategy { return strategy.NewFixedWindow() },
		"Optimistic":  func() limiter.Strategy { return strategy.NewOptimistic() },
		"GCRA":        func() limiter.Strategy { return strategy.NewGCRA() },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			perMin := limiter.Limit{Name: "q", Rate: 2, Period: time.Minute}
			perSec := limiter.Limit{Name: "q", Rate: 2, Period: time.Second}
			for _, many := range []bool{false, true} {
				lim, clock := limitertest.New(t, mk(), limiter.WithDenyCache(64))
				for range 2 {
					if r, err := lim.Allow(ctx, "s", perMin); err != nil || !r.Allowed {
						t.Fatalf("= %+v, %v; want admitted", r, err)
					}
				}
				if r, err := lim.Allow(ctx, "s", perMin); err != nil || r.Allowed {
					t.Fatalf("third of %s = %+v, %v; want denied", perMin, r, err)
				}
				if many {
					if a := lim.AllowMany(ctx, []limiter.Ask{{Key: "s", Limits: []limiter.Limit{perSec}}}); a[0].Err != nil {
						t.Fatal(a[0].Err)
					}
				} else if _, err := lim.Allow(ctx, "s", perSec); err != nil {
					t.Fatal(err)
				}
				clock.Advance(2 * time.Second)
				r, err := lim.Allow(ctx, "s", perMin)
				if err != nil {
					t.Fatal(err)
				}
				if !r.Allowed {
					t.Errorf("AllowMany %t: %s after the rule came back = %+v; want admitted (the window the remembered denial was for has ended)", many, perMin, r)
				}
			}
		})
	}
}

// TestDenyCacheBothFormsInOneBatch: one AllowMany with both forms of a
// named limit (the old one first): the new form's ask ends the old window,
// so the old form's denial, answered after it was sent, is not remembered.
func TestDenyCacheBothFormsInOneBatch(t *testing.T) {
	ctx := context.Background()
	perMin := limiter.Limit{Name: "q", Rate: 2, Period: time.Minute}
	perSec := limiter.Limit{Name: "q", Rate: 2, Period: time.Second}
	lim, clock := limitertest.New(t, strategy.NewFixedWindow(), limiter.WithDenyCache(64))
	for range 2 {
		if r, err := lim.Allow(ctx, "s", perMin); err != nil || !r.Allowed {
			t.Fatalf("= %+v, %v; want admitted", r, err)
		}
	}
	for i, x := range lim.AllowMany(ctx, []limiter.Ask{
		{Key: "s", Limits: []limiter.Limit{perMin}},
		{Key: "s", Limits: []limiter.Limit{perSec}},
	}) {
		if x.Err != nil || x.Result.Allowed {
			t.Fatalf("ask %d = %+v; want denied", i, x)
		}
	}
	clock.Advance(2 * time.Second)
	if r, err := lim.Allow(ctx, "s", perMin); err != nil || !r.Allowed {
		t.Errorf("%s 2 s after the batch = %+v, %v; want admitted (Redis would)", perMin, r, err)
	}
}

// TestDenyCacheUnnamedOtherForm: unnamed limits of one Period count in one
// key; a call with another burst (GCRA pulls the state back to it) makes
// the denial remembered under the first form one Redis would not give.
func TestDenyCacheUnnamedOtherForm(t *testing.T) {
	ctx := context.Background()
	big := limiter.Limit{Rate: 2, Period: time.Minute, Burst: 6}
	small := limiter.Limit{Rate: 2, Period: time.Minute, Burst: 2}
	lim, clock := limitertest.New(t, strategy.NewGCRA(), limiter.WithDenyCache(64))
	for range 6 {
		if r, err := lim.Allow(ctx, "s", big); err != nil || !r.Allowed {
			t.Fatalf("= %+v, %v; want admitted", r, err)
		}
	}
	if r, err := lim.Allow(ctx, "s", big); err != nil || r.Allowed {
		t.Fatalf("7th = %+v, %v; want denied", r, err)
	}
	if _, err := lim.Allow(ctx, "s", small); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if r, err := lim.Allow(ctx, "s", big); err != nil || !r.Allowed {
		t.Errorf("%s after %s = %+v, %v; want admitted (Redis would)", big, small, r, err)
	}
}

// gatedWindow holds the first Decide of cost 5 (a lease being taken)
// until released, as a slow round trip would.
type gatedWindow struct {
	strategy.FixedWindow
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *gatedWindow) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	if req.Cost == 5 && g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.release
	}
	return g.FixedWindow.Decide(ctx, st, req)
}

// TestLeaseTakenWhileAnotherFormCounts: while a lease is being renewed
// (its round trip slow), another form of its named limit counts in its key
// and ends its window; the units the lease still held must not be admitted
// meanwhile (14 of 10/min were).
func TestLeaseTakenWhileAnotherFormCounts(t *testing.T) {
	ctx := context.Background()
	perMin := limiter.Limit{Name: "q", Rate: 10, Period: time.Minute}
	perSec := limiter.Limit{Name: "q", Rate: 10, Period: time.Second}
	g := &gatedWindow{FixedWindow: strategy.NewFixedWindow(), entered: make(chan struct{}), release: make(chan struct{})}
	lim, clock := limitertest.New(t, g, limiter.WithQuotaLease(5))
	if r, err := lim.Allow(ctx, "s", perMin); err != nil || !r.Allowed || !r.Leased {
		t.Fatalf("first = %+v, %v; want admitted from a lease", r, err)
	}
	g.armed.Store(true) // 4 left; a call of cost 5 renews the lease, held in flight
	done := make(chan limiter.Result, 1)
	go func() {
		r, err := lim.AllowN(ctx, "s", 5, perMin)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	<-g.entered
	// the other form, a cost above the lease: straight to Redis; the key's
	// window is cut to 1 s
	if _, err := lim.AllowN(ctx, "s", 6, perSec); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second) // the lease's window is over
	n := int64(0)
	waiters := make(chan limiter.Result, 4)
	for range 4 {
		go func() {
			r, err := lim.Allow(ctx, "s", perMin)
			if err != nil {
				t.Error(err)
			}
			waiters <- r
		}()
	}
	time.Sleep(50 * time.Millisecond) // (the callers wait for the taker, or were wrongly admitted)
	close(g.release)
	if r := <-done; r.Allowed {
		n += 5
	}
	for range 4 {
		if r := <-waiters; r.Allowed {
			n++
		}
	}
	n += admitted(t, lim, 30, perMin)
	if n > 10 {
		t.Errorf("%s admitted %d in the window that began after %s ended the old one; want at most 10", perMin, n, perSec)
	}
}

// admitted makes n Allow calls of subject "s" under l and returns how many
// were admitted.
func admitted(t *testing.T, lim *limiter.Limiter, n int, l limiter.Limit) int64 {
	t.Helper()
	var got int64
	for range n {
		r, err := lim.Allow(context.Background(), "s", l)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			got++
		}
	}
	return got
}
