package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestConcurrencyShorterTTLKeepsLongerLease: the set's key is named by the
// subject and the limit's Max-free name, not its TTL, so callers with
// different TTLs (a TTL changed in a rollout) share it; a lease taken with
// a shorter TTL must not shorten the key below a longer lease held in it
// ("the set's key expires with its latest lease"), else the longer lease's
// slot frees early and more than Max are held.
func TestConcurrencyShorterTTLKeepsLongerLease(t *testing.T) {
	ctx := context.Background()
	m, st := newMini(t)
	long := limiter.InFlight{Max: 2, TTL: time.Minute}
	short := limiter.InFlight{Max: 2, TTL: 10 * time.Second}
	key, _ := limiter.InFlightKey("t", "u", long)
	if k, _ := limiter.InFlightKey("t", "u", short); k != key {
		t.Fatalf("keys %q and %q differ: the test needs one set", key, k)
	}
	lz := strategy.NewConcurrency()
	if s, err := lz.Acquire(ctx, st, limiter.LeaseRequest{Key: key, ID: "long", Limit: long}); err != nil || !s.Held {
		t.Fatalf("Acquire for 1m = %+v, %v; want held", s, err)
	}
	m.Advance(time.Second)
	if s, err := lz.Acquire(ctx, st, limiter.LeaseRequest{Key: key, ID: "short", Limit: short}); err != nil || !s.Held || s.InFlight != 2 {
		t.Fatalf("Acquire for 10s = %+v, %v; want held, 2 in flight", s, err)
	}
	if p := m.TTL(key); p != 59*time.Second {
		t.Errorf("PTTL after a 10s lease beside a 1m lease taken 1s before = %s, want 59s (the longer lease's end)", p)
	}
	m.Advance(11 * time.Second) // the short lease has ended, the long one has 48s left
	s, err := lz.Acquire(ctx, st, limiter.LeaseRequest{Key: key, ID: "third", Limit: long})
	if err != nil || !s.Held || s.InFlight != 2 {
		t.Errorf("Acquire at 12s = %+v, %v; want held, 2 in flight (the 1m lease is still held)", s, err)
	}
	if s, err := lz.Acquire(ctx, st, limiter.LeaseRequest{Key: key, ID: "fourth", Limit: long}); err != nil || s.Held {
		t.Errorf("a third lease of 2 at 12s = %+v, %v; want refused", s, err)
	}
}
