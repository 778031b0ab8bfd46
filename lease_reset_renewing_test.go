package limiter_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// gatedEval holds the first EvalSha sent after armed is set until release
// is closed, after closing started.
type gatedEval struct {
	store.Store
	armed   atomic.Bool
	started chan struct{}
	release chan struct{}
}

func (g *gatedEval) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	if g.armed.CompareAndSwap(true, false) {
		close(g.started)
		<-g.release
	}
	return g.Store.EvalSha(ctx, sha, keys, args)
}

// TestResetForgetsALeaseBeingRenewed: Reset "forgets the subject's leases",
// but leaseTable.forget skips a lease whose renewal is in flight
// (taking != nil), and that lease still holds the units of its previous
// lease, counted in the counter Reset deletes. Callers keep being admitted
// from them after Reset returned, on top of the new counter: the window
// after the Reset admits more than the rate.
func TestResetForgetsALeaseBeingRenewed(t *testing.T) {
	_, st := newMini(t)
	g := &gatedEval{Store: st, started: make(chan struct{}), release: make(chan struct{})}
	lim := newLimiter(t, g, limiter.WithQuotaLease(5))
	ctx := context.Background()
	l := limiter.PerHour(10)
	if r, err := lim.Allow(ctx, "s", l); err != nil || !r.Leased {
		t.Fatalf("first call: %+v, %v; want a lease (counter 5, 4 held)", r, err)
	}
	g.armed.Store(true)
	renewed := make(chan limiter.Result)
	go func() { r, _ := lim.AllowN(ctx, "s", 5, l); renewed <- r }() // 5 > 4 held: takes a new lease
	<-g.started
	if err := lim.Reset(ctx, "s", l); err != nil {
		t.Fatal(err)
	}
	// Four calls after Reset returned: with the renewal still unanswered,
	// none may be admitted from the units the old lease held.
	var admitted, leasedOld int64
	results := make(chan limiter.Result, 4)
	for range 4 {
		go func() {
			r, err := lim.Allow(ctx, "s", l)
			if err != nil {
				t.Error(err)
			}
			results <- r
		}()
	}
	returned := 0
	timeout := time.After(200 * time.Millisecond)
early:
	for returned < 4 {
		select {
		case r := <-results:
			returned++
			if r.Allowed {
				admitted++
				leasedOld++
			}
		case <-timeout:
			break early
		}
	}
	close(g.release)
	if r := <-renewed; r.Allowed {
		admitted += 5
	}
	for ; returned < 4; returned++ {
		if r := <-results; r.Allowed {
			admitted++
		}
	}
	for range 20 {
		r, err := lim.Allow(ctx, "s", l)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			admitted++
		}
	}
	if admitted > l.Rate {
		t.Errorf("after Reset returned, one window of %d admitted %d units (%d of them before the renewal was answered, from the lease taken before Reset)", l.Rate, admitted, leasedOld)
	}
}
