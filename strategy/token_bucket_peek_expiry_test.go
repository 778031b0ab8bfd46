package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestTokenBucketPeekSecondFormExpires: a Peek under another rule than the
// one that wrote a bucket of the second form (an interval that is not whole
// milliseconds) reports the bucket as it is: it refills at the peeking
// limit's rate only until its key expires, at the writing rule's time until
// full, and is full then: its RetryAfter and ResetAfter are at most the
// key's TTL (a rate lowered, 30/s to 3/s, and a burst raised, 3 to 30,
// read 333 ms and 10 s at the peeking rate, not 100 ms and 1 s), and a
// Peek a millisecond before the RetryAfter ends still denies.
func TestTokenBucketPeekSecondFormExpires(t *testing.T) {
	for _, tc := range []struct {
		name              string
		wrote, peek       limiter.Limit
		took              int64
		retry, reset      time.Duration
		remainingAtTheTTL int64
	}{
		{"rate lowered", limiter.Limit{Rate: 30, Period: time.Second, Burst: 3}, limiter.Limit{Rate: 3, Period: time.Second, Burst: 3}, 3, 100 * time.Millisecond, 100 * time.Millisecond, 3},
		{"burst raised", limiter.Limit{Rate: 3, Period: time.Second, Burst: 3}, limiter.Limit{Rate: 3, Period: time.Second, Burst: 30}, 3, 334 * time.Millisecond, time.Second, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, st := newMini(t)
			lim := newLim(t, st, strategy.NewTokenBucket())
			ctx := context.Background()
			if r, err := lim.AllowN(ctx, "u", tc.took, tc.wrote); err != nil || !r.Allowed {
				t.Fatalf("AllowN(%d, %v) = %+v, %v", tc.took, tc.wrote, r, err)
			}
			key, _ := limiter.Key("t", "u", tc.wrote)
			ttl := pttl(t, m, key)
			p, err := lim.Peek(ctx, "u", tc.peek)
			if err != nil || p.Allowed != (tc.retry == 0) || p.RetryAfter != tc.retry || p.ResetAfter != tc.reset || tc.reset != ttl {
				t.Fatalf("Peek(%v) = %+v, %v (key TTL %s); want RetryAfter %s, ResetAfter %s", tc.peek, p, err, ttl, tc.retry, tc.reset)
			}
			m.Advance(p.RetryAfter - time.Millisecond)
			if q, err := lim.Peek(ctx, "u", tc.peek); err != nil || q.Allowed {
				t.Errorf("Peek(%v) 1 ms before its RetryAfter %s ended = %+v, %v; want denied", tc.peek, p.RetryAfter, q, err)
			}
			m.Advance(ttl - p.RetryAfter + time.Millisecond)
			q, err := lim.Peek(ctx, "u", tc.peek)
			if err != nil || !q.Allowed || q.Remaining != tc.remainingAtTheTTL || q.ResetAfter != 0 {
				t.Errorf("Peek(%v) once the key expired = %+v, %v; want admitted, %d left, full", tc.peek, q, err, tc.remainingAtTheTTL)
			}
		})
	}
}

// TestTokenBucketSecondFormFullInItsLastMillisecond: a bucket of the second
// form found in its key's expiry millisecond (PTTL 0: Redis keeps a key
// until that millisecond is over) is full, as it is once it expired, by
// the rule that wrote it: a Peek and an Allow under a slower rate of the
// same period read it full, not refilled at the slower rate since.
func TestTokenBucketSecondFormFullInItsLastMillisecond(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewTokenBucket())
	ctx := context.Background()
	fast := limiter.Limit{Rate: 30, Period: time.Second, Burst: 3}
	slow := limiter.Limit{Rate: 3, Period: time.Second, Burst: 3}
	// 2 of 3 taken: refilled at the slower rate since, 1.3 tokens, which
	// admits one
	if r, err := lim.AllowN(ctx, "u", 2, fast); err != nil || !r.Allowed {
		t.Fatalf("AllowN(2, %v) = %+v, %v", fast, r, err)
	}
	key, _ := limiter.Key("t", "u", fast)
	m.SetTTL(key, 500*time.Microsecond) // PTTL 0, the key still there
	if p := pttl(t, m, key); p >= time.Millisecond || !m.Exists(key) {
		t.Fatalf("TTL %s, exists %v; want below a millisecond (PTTL 0) and the key", p, m.Exists(key))
	}
	if r, err := lim.Peek(ctx, "u", slow); err != nil || !r.Allowed || r.Remaining != 3 {
		t.Errorf("Peek(%v) in the key's last millisecond = %+v, %v; want admitted, full", slow, r, err)
	}
	if r, err := lim.Allow(ctx, "u", slow); err != nil || !r.Allowed || r.Remaining != 2 {
		t.Errorf("Allow(%v) in the key's last millisecond = %+v, %v; want admitted, 2 left", slow, r, err)
	}
}
