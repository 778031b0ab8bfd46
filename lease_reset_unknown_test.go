package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// lateDel is a store whose DELs, while late is set, are written but their
// replies lost (store.ErrUnknownOutcome, as the store contract allows):
// each reaches Redis later, when arrive is closed (a congested
// connection).
type lateDel struct {
	store.Store
	late   bool
	arrive chan struct{}
	wg     sync.WaitGroup
}

func (d *lateDel) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if d.late && len(cmds) == 1 && cmds[0].Name == "DEL" {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			<-d.arrive
			_, _ = d.Store.Do(context.Background(), cmds...)
		}()
		return nil, fmt.Errorf("late DEL: %w", store.ErrUnknownOutcome)
	}
	return d.Store.Do(ctx, cmds...)
}

// TestLeaseAfterResetWithUnknownOutcome: a Reset whose DEL's reply was
// lost may see the DEL reach Redis later. A lease taken meanwhile would
// admit its units, counted in the counter the late DEL deletes, on top of
// a window another process fills anew: 15 admitted of 10 per hour. Until
// a Reset of the subject ends with its DEL done, a call goes to Redis, as
// without leases (11: the call made before the DEL arrived counted in the
// counter it deleted, then 10); after one, leases are taken again.
func TestLeaseAfterResetWithUnknownOutcome(t *testing.T) {
	m, st := newMini(t)
	d := &lateDel{Store: st, late: true, arrive: make(chan struct{})}
	ctx := context.Background()
	leased := newLimiter(t, d, limiter.WithQuotaLease(5), limiter.WithClock(m.Now))
	other := newLimiter(t, st) // another process, without leases
	l := limiter.PerHour(10)
	if err := leased.Reset(ctx, "u", l); !errors.Is(err, store.ErrUnknownOutcome) {
		t.Fatalf("Reset = %v; want an unknown outcome (the test's premise)", err)
	}
	admitted := 0
	r, err := leased.Allow(ctx, "u", l)
	if err != nil || !r.Allowed {
		t.Fatalf("first call after the Reset: %+v, %v", r, err)
	}
	admitted++
	close(d.arrive) // the DEL reaches Redis
	d.wg.Wait()
	for _, x := range []*limiter.Limiter{other, leased} {
		for range 20 {
			r, err := x.Allow(ctx, "u", l)
			if err != nil {
				t.Fatal(err)
			}
			if r.Allowed {
				admitted++
				if r.Leased {
					t.Errorf("admitted from a lease before a Reset settled the one whose outcome is unknown: %+v", r)
				}
			}
		}
	}
	if admitted != 11 {
		t.Errorf("%d admitted in one window of %s; want 11: the call made before the DEL reached Redis, whose count it deleted, and 10 after it, as without leases", admitted, l)
	}

	// A Reset that ends with its DEL done settles it: leases again.
	d.late = false
	if err := leased.Reset(ctx, "u", l); err != nil {
		t.Fatal(err)
	}
	if _, err := leased.Allow(ctx, "u", l); err != nil {
		t.Fatal(err)
	}
	if r, err := leased.Allow(ctx, "u", l); err != nil || !r.Allowed || !r.Leased {
		t.Errorf("the second call after a Reset that settled: %+v, %v; want admitted from a lease", r, err)
	}
}
