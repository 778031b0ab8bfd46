package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// A Peek of a bucket of another scale and a higher burst reports it full
// once it holds this limit's burst: emptied at 10/s burst 10 (a token
// every 100 ms, its key expiring in 1 s), read at 5/s burst 2, it holds
// 2 tokens 800 ms before its key expires: ResetAfter 200 ms, not 1 s,
// and 0 once it holds them.
func TestTokenBucketPeekOtherScaleBurstLowered(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewTokenBucket())
	ctx := context.Background()
	a := limiter.Limit{Rate: 10, Period: time.Second, Burst: 10}
	b := limiter.Limit{Rate: 5, Period: time.Second, Burst: 2}
	if r, err := lim.AllowN(ctx, "u", 10, a); err != nil || !r.Allowed {
		t.Fatalf("AllowN(10) = %+v, %v", r, err)
	}
	r, err := lim.Peek(ctx, "u", b)
	if err != nil || r.Allowed || r.RetryAfter != 100*time.Millisecond || r.ResetAfter != 200*time.Millisecond {
		t.Errorf("Peek at 5/s burst 2 = %+v, %v; want denied, RetryAfter 100ms, ResetAfter 200ms", r, err)
	}
	m.Advance(200 * time.Millisecond)
	r, err = lim.Peek(ctx, "u", b)
	if err != nil || !r.Allowed || r.Remaining != 2 || r.ResetAfter != 0 {
		t.Errorf("Peek 200ms later = %+v, %v; want admitted, Remaining 2, ResetAfter 0 (full at burst 2)", r, err)
	}
}

// A bucket of whole milliseconds whose key's TTL is a little longer than
// the time to fill from empty (10/s burst 10: 1 s; found with 1.05 s) is
// empty, not emptier: the next call is denied with RetryAfter 100 ms,
// ResetAfter 1 s and Remaining 0, and its expiry is put back within 1 s.
func TestTokenBucketSlightlyLongTTLCapped(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewTokenBucket())
	ctx := context.Background()
	l := limiter.Limit{Rate: 10, Period: time.Second, Burst: 10}
	if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed {
		t.Fatalf("Allow = %+v, %v", r, err)
	}
	key := m.Keys()[0]
	m.SetTTL(key, 1050*time.Millisecond)
	r, err := lim.Allow(ctx, "u", l)
	if err != nil || r.Allowed || r.Remaining != 0 || r.RetryAfter != 100*time.Millisecond || r.ResetAfter != time.Second {
		t.Errorf("Allow with TTL 1.05 s = %+v, %v; want denied, Remaining 0, RetryAfter 100ms, ResetAfter 1s", r, err)
	}
	if ttl := m.TTL(key); ttl <= 0 || ttl > time.Second {
		t.Errorf("after a call that writes the key has TTL %s; want within the 1 s to fill from empty", ttl)
	}
}
