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

// TestDenyCacheOtherFormBound: a named limit's period changed and changed
// back in this process. The shorter form ends the window the remembered
// denial was for, and the denial is served until its RetryAfter ends,
// although Redis would admit (the documented bound): never longer, and
// never an admission.
func TestDenyCacheOtherFormBound(t *testing.T) {
	ctx := context.Background()
	perMin := limiter.Limit{Name: "q", Rate: 2, Period: time.Minute}
	perSec := limiter.Limit{Name: "q", Rate: 2, Period: time.Second}
	lim, clock := limitertest.New(t, strategy.NewFixedWindow(), limiter.WithDenyCache(64))
	for range 2 {
		if r, err := lim.Allow(ctx, "s", perMin); err != nil || !r.Allowed {
			t.Fatalf("= %+v, %v; want admitted", r, err)
		}
	}
	d, err := lim.Allow(ctx, "s", perMin)
	if err != nil || d.Allowed {
		t.Fatalf("third of %s = %+v, %v; want denied", perMin, d, err)
	}
	if _, err := lim.Allow(ctx, "s", perSec); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	if r, err := lim.Allow(ctx, "s", perMin); err != nil || (r.Allowed != !r.Cached) || (r.Cached && r.RetryAfter > d.RetryAfter-2*time.Second) {
		t.Errorf("%s after the rule came back = %+v, %v; want admitted, or a cached denial ending when the first one did", perMin, r, err)
	}
	clock.Advance(d.RetryAfter)
	if r, err := lim.Allow(ctx, "s", perMin); err != nil || !r.Allowed {
		t.Errorf("%s once the remembered denial ended = %+v, %v; want admitted", perMin, r, err)
	}
}

// gated holds the first Decide that hold picks, once armed, until
// released: a slow round trip.
type gated struct {
	strategy.FixedWindow
	hold    func(limiter.Request) bool
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func newGated(hold func(limiter.Request) bool) *gated {
	return &gated{FixedWindow: strategy.NewFixedWindow(), hold: hold, entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gated) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	if g.hold(req) && g.armed.CompareAndSwap(true, false) {
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
	g := newGated(func(req limiter.Request) bool { return req.Cost == 5 }) // a lease being taken
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

// TestLeaseOfAnotherFormThroughACopy: a With copy has leases of its own; a
// call of another form through the original (without leases) ends the
// window of the copy's lease, which must not admit after it.
func TestLeaseOfAnotherFormThroughACopy(t *testing.T) {
	ctx := context.Background()
	perMin := limiter.Limit{Name: "q", Rate: 10, Period: time.Minute}
	perSec := limiter.Limit{Name: "q", Rate: 10, Period: time.Second}
	lim, clock := limitertest.New(t, strategy.NewFixedWindow())
	cp, err := lim.With(limiter.WithQuotaLease(5))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := cp.Allow(ctx, "s", perMin); err != nil || !r.Leased {
		t.Fatalf("first = %+v, %v; want admitted from a lease", r, err)
	}
	if _, err := lim.Allow(ctx, "s", perSec); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	if n := admitted(t, cp, 30, perMin); n > 10 {
		t.Errorf("%s admitted %d at one instant through the copy; want at most 10", perMin, n)
	}
}

// TestLeaseNotTakenWhileAnotherFormIsOnItsWay: a lease of the old form
// taken while a call of the new form is on its way would be counted in a
// window that call then ends; no lease is taken meanwhile.
func TestLeaseNotTakenWhileAnotherFormIsOnItsWay(t *testing.T) {
	ctx := context.Background()
	perMin := limiter.Limit{Name: "q", Rate: 10, Period: time.Minute}
	perSec := limiter.Limit{Name: "q", Rate: 10, Period: time.Second}
	g := newGated(func(req limiter.Request) bool { return req.Limits[0].Period == time.Second }) // the new form's call
	lim, clock := limitertest.New(t, g, limiter.WithQuotaLease(5))
	g.armed.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := lim.AllowN(ctx, "s", 6, perSec) // a cost above the lease: straight to Redis
		done <- err
	}()
	<-g.entered
	// while the 1 s call is on its way: decided in Redis, not leased
	if r, err := lim.Allow(ctx, "s", perMin); err != nil || r.Leased {
		t.Errorf("%s while %s is on its way = %+v, %v; want decided in Redis", perMin, perSec, r, err)
	}
	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	if n := admitted(t, lim, 30, perMin); n > 10 {
		t.Errorf("%s admitted %d in the window that began after %s ended the old one; want at most 10", perMin, n, perSec)
	}
}

// panicOnce panics in its first Decide once armed.
type panicOnce struct {
	strategy.FixedWindow
	armed atomic.Bool
}

func (p *panicOnce) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	if p.armed.CompareAndSwap(true, false) {
		panic("strategy bug")
	}
	return p.FixedWindow.Decide(ctx, st, req)
}

// recovering reports whether f panicked.
func recovering(f func()) (panicked bool) {
	defer func() { panicked = recover() != nil }()
	f()
	return false
}

// TestLeasesAfterAPanic: a strategy that panicked (the panic recovered, as
// net/http does) leaves no lease state behind: the other form's call that
// panicked does not stop leases for good, and a lease take that panicked
// does not block the subject's next calls.
func TestLeasesAfterAPanic(t *testing.T) {
	ctx := context.Background()
	perMin := limiter.Limit{Name: "q", Rate: 100, Period: time.Minute}
	perSec := limiter.Limit{Name: "q", Rate: 100, Period: time.Second}
	p := &panicOnce{FixedWindow: strategy.NewFixedWindow()}
	lim, clock := limitertest.New(t, p, limiter.WithQuotaLease(5))
	p.armed.Store(true)
	if !recovering(func() { _, _ = lim.Allow(ctx, "s", perSec) }) {
		t.Fatal("no panic")
	}
	clock.Advance(2 * time.Minute)
	if r, err := lim.Allow(ctx, "s", perMin); err != nil || !r.Allowed || !r.Leased {
		t.Errorf("%s after another form's call panicked = %+v, %v; want admitted from a lease", perMin, r, err)
	}
	p.armed.Store(true)
	if !recovering(func() { _, _ = lim.Allow(ctx, "t", perMin) }) {
		t.Fatal("no panic")
	}
	done := make(chan limiter.Result, 1)
	go func() {
		r, _ := lim.Allow(ctx, "t", perMin)
		done <- r
	}()
	select {
	case r := <-done:
		if !r.Allowed {
			t.Errorf("%s after a lease take panicked = %+v; want admitted", perMin, r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call after a lease take panicked still waits after 10 s (for good)")
	}
}
