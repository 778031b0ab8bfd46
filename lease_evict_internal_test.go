package limiter

import (
	"fmt"
	"testing"
	"time"
)

// TestEvictDropsLeastRecentlyUsed: a full lease table drops the
// leases used longest ago, keeps the recent ones and those being taken.
func TestEvictDropsLeastRecentlyUsed(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	tb := &leaseTable{units: 5, now: func() time.Time { return base }, m: map[leaseID]*quotaLease{}, max: 8}
	id := func(i int) leaseID { return leaseKey("p", fmt.Sprint("s", i), PerHour(100)) }
	for i := range 8 {
		tb.m[id(i)] = &quotaLease{limit: PerHour(100), left: 3, leftUntil: base.Add(time.Hour), used: base.Add(time.Duration(i) * time.Second)}
	}
	tb.m[id(0)].taking = newLeaseTake() // oldest, but being taken
	tb.evict(4)
	if len(tb.m) != 4 {
		t.Fatalf("%d leases after evict(4); want 4", len(tb.m))
	}
	for _, i := range []int{0, 5, 6, 7} {
		if tb.m[id(i)] == nil {
			t.Errorf("lease %d (used %ds) dropped; want the least recently used dropped", i, i)
		}
	}
}
