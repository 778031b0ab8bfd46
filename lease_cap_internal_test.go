package limiter

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quotagate/limiter/store"
)

// hourWindow admits every request as a window of an hour would, without
// I/O, so that only the Limiter's own table is measured.
type hourWindow struct{}

func (hourWindow) Decide(_ context.Context, _ store.Store, req Request) (Result, error) {
	return Result{Allowed: true, Remaining: req.Limits[0].Rate - req.Cost, ResetAfter: time.Hour}, nil
}

func (hourWindow) WindowQuota() {}

// TestLeaseTableBounded: every subject's first single-limit call takes a
// lease, kept until its window ends (up to a month). Subjects seen once
// each (a per-IP limit under a botnet) must not grow the table past its
// bound; a subject in use keeps its lease.
func TestLeaseTableBounded(t *testing.T) {
	_, st, now, advance := clockedMini(t)
	lim, err := New(st, hourWindow{}, WithQuotaLease(5), WithClock(now))
	if err != nil {
		t.Fatal(err)
	}
	if lim.leases.max != MaxQuotaLeases {
		t.Fatalf("lease table bound = %d; want MaxQuotaLeases (%d)", lim.leases.max, MaxQuotaLeases)
	}
	const bound = 1000
	lim.leases.max = bound
	ctx := context.Background()
	l := PerHour(1000)
	hot := func() Result {
		t.Helper()
		r, err := lim.Allow(ctx, "hot", l)
		if err != nil || !r.Allowed {
			t.Fatalf("hot subject: %+v, %v", r, err)
		}
		return r
	}
	hot()
	most := 0
	for i := range 20 * bound {
		advance(time.Microsecond) // each lease used at its own time
		if _, err := lim.Allow(ctx, fmt.Sprint("ip-", i), l); err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 {
			hot() // used now and then: the most recently used stay
		}
		lim.leases.mu.Lock()
		most = max(most, len(lim.leases.m))
		lim.leases.mu.Unlock()
	}
	if most > bound {
		t.Errorf("%d one-off subjects: the lease table held up to %d leases; want at most %d", 20*bound, most, bound)
	}
	if r := hot(); !r.Leased {
		t.Errorf("the subject used every 100 calls lost its lease: %+v", r)
	}
}
