package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// A TokenBucket key stripped of its TTL (SET over it, keeping its value)
// is read as refilled by nothing since it was written: an emptied bucket
// stays empty (an interval that is not whole milliseconds: 3/s).
func TestTokenBucketStrippedKeyNotRefilled(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewTokenBucket())
	ctx := context.Background()
	l := limiter.PerSecond(3)
	if r, err := lim.AllowN(ctx, "u", 3, l); err != nil || !r.Allowed {
		t.Fatalf("AllowN(3) = %+v, %v", r, err)
	}
	key := m.Keys()[0]
	v, _ := m.Get(key)
	if err := m.Set(key, v); err != nil { // the value kept, the TTL gone
		t.Fatal(err)
	}
	if r, err := lim.Allow(ctx, "u", l); err != nil || r.Allowed {
		t.Errorf("an emptied bucket stripped of its TTL: the next call = %+v, %v; want denied (nothing refilled)", r, err)
	}
	if ttl := m.TTL(key); ttl <= 0 || ttl > time.Second {
		t.Errorf("after the call its TTL is %s; want its expiry back, within the 1 s to fill", ttl)
	}
}

// A TokenBucket key found with a TTL longer than the time to fill from
// empty (an interval of whole milliseconds: 10/s) gets its expiry back at
// the next call that writes, and locks its subject out no longer.
func TestTokenBucketLongTTLRepaired(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewTokenBucket())
	ctx := context.Background()
	l := limiter.PerSecond(10)
	if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed {
		t.Fatalf("Allow = %+v, %v", r, err)
	}
	key := m.Keys()[0]
	m.SetTTL(key, time.Hour)
	r, err := lim.Allow(ctx, "u", l)
	if err != nil || r.RetryAfter > time.Second {
		t.Errorf("the call after the TTL was set to an hour = %+v, %v; want RetryAfter within the 1 s to fill", r, err)
	}
	if ttl := m.TTL(key); ttl > time.Second {
		t.Errorf("after a call that writes the bucket keeps TTL %s, above the 1 s to fill from empty", ttl)
	}
}
