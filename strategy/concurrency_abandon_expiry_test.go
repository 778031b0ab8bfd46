package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestConcurrencyAbandonSetsExpiry: Abandon's tombstone keeps the set's
// key for its whole TTL ("the set's key expires with its latest lease (or
// tombstone)"): on a set it creates, the key gets a TTL at once (an idle
// subject leaves nothing behind); on a set whose latest lease ends before
// the tombstone, the key outlives the lease, so that the abandoned Acquire,
// arriving after the lease ended, is still refused.
func TestConcurrencyAbandonSetsExpiry(t *testing.T) {
	ctx := context.Background()
	m, st := newMini(t)
	f := limiter.InFlight{Max: 1, TTL: 10 * time.Second}
	lz := strategy.NewConcurrency()

	idle, _ := limiter.InFlightKey("t", "idle", f)
	if err := lz.Abandon(ctx, st, limiter.LeaseRequest{Key: idle, ID: "x", Limit: f}); err != nil {
		t.Fatal(err)
	}
	if p := m.TTL(idle); p != f.TTL {
		t.Errorf("PTTL of a set made by Abandon = %s, want %s (the tombstone's)", p, f.TTL)
	}

	key, _ := limiter.InFlightKey("t", "u", f)
	if s, err := lz.Acquire(ctx, st, limiter.LeaseRequest{Key: key, ID: "a", Limit: f}); err != nil || !s.Held {
		t.Fatalf("Acquire = %+v, %v; want held", s, err)
	}
	m.Advance(5 * time.Second)
	late := limiter.LeaseRequest{Key: key, ID: "b", Limit: f}
	if err := lz.Abandon(ctx, st, late); err != nil {
		t.Fatal(err)
	}
	if p := m.TTL(key); p != f.TTL {
		t.Errorf("PTTL after Abandon at 5s beside a lease ending at 10s = %s, want %s (the tombstone ends at 15s)", p, f.TTL)
	}
	m.Advance(6 * time.Second) // 11s: a has ended, b's tombstone has 4s left
	if s, err := lz.Acquire(ctx, st, late); err != nil || s.Held || s.InFlight != 0 {
		t.Errorf("the abandoned Acquire arriving at 11s = %+v, %v; want refused, none in flight (its tombstone lasts until 15s)", s, err)
	}
}
