package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// A rate change keeps the fraction of the next token, into either form:
// half a token at 10/s (50 ms of 100) is half a token at 5/s (100 ms of
// 200) and at 3/s (166 667 µs of 333 333.3, 167 ms from a whole one); 0.3
// of a token (30 ms) is 0.3 at 5/s, 140 ms from a whole one.
func TestTokenBucketRateChangeKeepsFraction(t *testing.T) {
	a := limiter.Limit{Rate: 10, Period: time.Second, Burst: 5}
	for _, tc := range []struct {
		after        time.Duration
		rate         int64
		retry, reset time.Duration // reset 0: not checked
	}{
		{50 * time.Millisecond, 5, 100 * time.Millisecond, 900 * time.Millisecond},
		{50 * time.Millisecond, 3, 167 * time.Millisecond, 0},
		{30 * time.Millisecond, 5, 140 * time.Millisecond, 0},
	} {
		m, st := newMini(t)
		lim := newLim(t, st, strategy.NewTokenBucket())
		ctx := context.Background()
		b := limiter.Limit{Rate: tc.rate, Period: time.Second, Burst: 5}
		if r, err := lim.AllowN(ctx, "u", 5, a); err != nil || !r.Allowed {
			t.Fatalf("AllowN(5) = %+v, %v", r, err)
		}
		m.Advance(tc.after)
		r, err := lim.Allow(ctx, "u", b)
		if err != nil || r.Allowed || r.RetryAfter != tc.retry || (tc.reset != 0 && r.ResetAfter != tc.reset) {
			t.Errorf("%s after 5 taken at %v, Allow at %v = %+v, %v; want denied, RetryAfter %s (ResetAfter %s)", tc.after, a, b, r, err, tc.retry, tc.reset)
		}
	}
}

// A Peek of a bucket of another scale reports it as it is: refilling at
// its own rate (a token every 100 ms), full when its key expires.
func TestTokenBucketPeekOtherScale(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewTokenBucket())
	ctx := context.Background()
	a := limiter.Limit{Rate: 10, Period: time.Second, Burst: 5}
	b := limiter.Limit{Rate: 5, Period: time.Second, Burst: 10}
	if r, err := lim.AllowN(ctx, "u", 5, a); err != nil || !r.Allowed {
		t.Fatalf("AllowN(5) = %+v, %v", r, err)
	}
	r, err := lim.Peek(ctx, "u", b)
	if err != nil || r.Allowed || r.RetryAfter != 100*time.Millisecond || r.ResetAfter != 500*time.Millisecond {
		t.Errorf("Peek at 5/s burst 10 = %+v, %v; want denied, RetryAfter 100ms, ResetAfter 500ms", r, err)
	}
	m.Advance(99 * time.Millisecond)
	if r, _ := lim.Peek(ctx, "u", b); r.Allowed {
		t.Errorf("Peek 1ms before RetryAfter admitted: %+v", r)
	}
	m.Advance(time.Millisecond)
	if r, _ := lim.Peek(ctx, "u", b); !r.Allowed {
		t.Errorf("Peek at RetryAfter denied: %+v", r)
	}
}

// A burst lowered under a bucket of the second form (3/s: a token every
// 333.3 ms) leaves its key a TTL above the new time to fill from
// empty (1 s): a call that writes, admitted or denied, gives it back.
func TestTokenBucketMicrosecondBurstLoweredExpiry(t *testing.T) {
	for _, took := range []int64{27, 30} {
		m, st := newMini(t)
		lim := newLim(t, st, strategy.NewTokenBucket())
		ctx := context.Background()
		big := limiter.Limit{Rate: 3, Period: time.Second, Burst: 30}
		small := limiter.Limit{Rate: 3, Period: time.Second, Burst: 3}
		if r, err := lim.AllowN(ctx, "u", took, big); err != nil || !r.Allowed {
			t.Fatalf("AllowN(%d) = %+v, %v", took, r, err)
		}
		other := limiter.Limit{Rate: 100, Period: time.Second, Name: "y"} // two limits: the general path
		r, err := lim.Allow(ctx, "u", small, other)
		if err != nil || r.Allowed != (took == 27) {
			t.Fatalf("took %d: Allow(3/s burst 3) = %+v, %v", took, r, err)
		}
		for _, key := range m.Keys() {
			if ttl := m.TTL(key); ttl <= 0 || ttl > time.Second {
				t.Errorf("took %d: after a call that writes key %s has TTL %v; want within the 1 s to fill from empty", took, key, ttl)
			}
		}
	}
}

// A bucket of the second form read by a limit of whole milliseconds lacks
// what it lacked, rounded up to the ms: 1.003 tokens at 10/s are 0.997 of
// a token (99.7 ms) from 2.
func TestTokenBucketSecondFormToMsRoundsUp(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewTokenBucket())
	ctx := context.Background()
	a := limiter.Limit{Rate: 3, Period: time.Second}
	b := limiter.Limit{Rate: 10, Period: time.Second, Burst: 3}
	if r, err := lim.Allow(ctx, "u", a); err != nil || !r.Allowed {
		t.Fatalf("Allow at %v = %+v, %v", a, r, err)
	}
	m.Advance(time.Millisecond)
	if r, err := lim.Allow(ctx, "u", a); err != nil || !r.Allowed { // 2 + 0.003 - 1 tokens
		t.Fatalf("second Allow at %v = %+v, %v", a, r, err)
	}
	r, err := lim.AllowN(ctx, "u", 2, b)
	if err != nil || r.Allowed || r.RetryAfter != 100*time.Millisecond {
		t.Errorf("AllowN(2) at 10/s = %+v, %v; want denied, RetryAfter 100ms", r, err)
	}
	m.Advance(99 * time.Millisecond)
	if r, _ := lim.AllowN(ctx, "u", 2, b); r.Allowed {
		t.Errorf("admitted 1 ms before its RetryAfter: %+v", r)
	}
}

// A bucket of the second form found with a longer TTL than it was written
// with is read as refilled by nothing since: its tokens are kept.
func TestTokenBucketMicrosecondLongerTTLKeepsTokens(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewTokenBucket())
	ctx := context.Background()
	l := limiter.PerSecond(3)
	if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed {
		t.Fatalf("Allow = %+v, %v", r, err)
	}
	key := m.Keys()[0]
	m.SetTTL(key, 900*time.Millisecond) // written with 334 ms
	r, err := lim.Allow(ctx, "u", l)
	if err != nil || !r.Allowed || r.Remaining != 1 {
		t.Errorf("Allow = %+v, %v; want admitted, 1 remaining (2 tokens kept)", r, err)
	}
}

// Burst × Period (µs) up to 2^51 is accepted: a day's period takes a
// burst of 26 062 (2 251 756 800 000 000 units), not 26 063.
func TestTokenBucketCheckLimitBoundary(t *testing.T) {
	tb := strategy.NewTokenBucket()
	if err := tb.CheckLimit(limiter.Limit{Rate: 1, Period: 24 * time.Hour, Burst: 26062}); err != nil {
		t.Errorf("burst 26062 per day: %v; want accepted (below 2^51 units)", err)
	}
	if err := tb.CheckLimit(limiter.Limit{Rate: 1, Period: 24 * time.Hour, Burst: 26063}); err == nil {
		t.Errorf("burst 26063 per day accepted; want ErrInvalidLimit (above 2^51 units)")
	}
}
