package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// limiter.LeaseAbandoner / Concurrency.Abandon: the tombstone "refuses an
// Acquire or Extend of it for the lease's TTL" — not after it.
func TestConcurrencyTombstoneEnds(t *testing.T) {
	ctx := context.Background()
	m, st := newMini(t)
	f := limiter.InFlight{Max: 2, TTL: time.Second}
	long := limiter.InFlight{Max: 2, TTL: 10 * time.Second}
	key, _ := limiter.InFlightKey("t", "u", f)
	lz := strategy.NewConcurrency()
	x := limiter.LeaseRequest{Key: key, ID: "x", Limit: f}
	if err := lz.Abandon(ctx, st, x); err != nil {
		t.Fatal(err)
	}
	// another holder keeps the set alive past the tombstone's TTL
	if s, err := lz.Acquire(ctx, st, limiter.LeaseRequest{Key: key, ID: "y", Limit: long}); err != nil || !s.Held {
		t.Fatalf("y = %+v, %v", s, err)
	}
	m.Advance(1500 * time.Millisecond) // the tombstone (1s) has ended
	if s, err := lz.Acquire(ctx, st, x); err != nil || !s.Held || s.InFlight != 2 {
		t.Errorf("Acquire of x 0.5s after its tombstone's TTL, 1 of 2 slots held = %+v, %v; want held, 2 in flight", s, err)
	}
}

// TestConcurrencyTombstoneEndsExactly: a tombstone refuses its ID until
// the millisecond its TTL ends, not in it (an Acquire then takes the
// slot), and an expired tombstone leaves the set on the next call, as an
// expired lease does, however long another lease keeps the set alive.
func TestConcurrencyTombstoneEndsExactly(t *testing.T) {
	ctx := context.Background()
	m, st := newMini(t)
	f := limiter.InFlight{Max: 3, TTL: 10 * time.Second}
	key, _ := limiter.InFlightKey("t", "u", f)
	lz := strategy.NewConcurrency()
	x := limiter.LeaseRequest{Key: key, ID: "x", Limit: f}
	w := limiter.LeaseRequest{Key: key, ID: "w", Limit: f}
	for _, r := range []limiter.LeaseRequest{x, w} {
		if err := lz.Abandon(ctx, st, r); err != nil {
			t.Fatal(err)
		}
	}
	// another holder keeps the set alive past the tombstones' TTL
	if s, err := lz.Acquire(ctx, st, limiter.LeaseRequest{Key: key, ID: "y", Limit: limiter.InFlight{Max: 3, TTL: time.Minute}}); err != nil || !s.Held {
		t.Fatalf("y = %+v, %v", s, err)
	}
	m.Advance(10*time.Second - time.Millisecond)
	if s, err := lz.Acquire(ctx, st, x); err != nil || s.Held {
		t.Fatalf("Acquire of x a millisecond before its tombstone ends = %+v, %v; want refused", s, err)
	}
	m.Advance(time.Millisecond)
	if s, err := lz.Acquire(ctx, st, x); err != nil || !s.Held || s.InFlight != 2 {
		t.Fatalf("Acquire of x as its tombstone ends = %+v, %v; want held, 2 in flight", s, err)
	}
	if members, err := m.ZMembers(key); err != nil || len(members) != 2 {
		t.Errorf("set %q, %v; want x and y (w's tombstone ended: removed)", members, err)
	}
}
