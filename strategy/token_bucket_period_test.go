package strategy_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestTokenBucketPeriodChangeKeepsTokens: a named limit whose period
// changes (the same key) keeps its whole tokens. The bucket held its
// tokens scaled by the period in µs without the period: lengthened 10/s to
// 10/day with 5 tokens left, the new period read them as 5e6 / 8.64e10 of
// a token and denied the subject for 2.4 hours; shortened 10/day to 10/s
// with 1 token left, it read a full bucket.
func TestTokenBucketPeriodChangeKeepsTokens(t *testing.T) {
	ctx := context.Background()
	perSecond := limiter.Limit{Rate: 10, Period: time.Second, Name: "q"}
	perDay := limiter.Limit{Rate: 10, Period: 24 * time.Hour, Name: "q"}
	cases := []struct {
		from, to limiter.Limit
		use      int64
	}{
		{perSecond, perDay, 5},
		{perDay, perSecond, 9},
		{limiter.Limit{Rate: 3, Period: 7 * time.Second, Name: "q"}, limiter.Limit{Rate: 3, Period: 11 * time.Second, Name: "q"}, 1},
		// the same interval (100 ms) and burst in other terms
		{perSecond, limiter.Limit{Rate: 20, Period: 2 * time.Second, Burst: 10, Name: "q"}, 3},
		// a millisecond interval to a microsecond one and back
		{perSecond, limiter.Limit{Rate: 3, Period: time.Second, Burst: 10, Name: "q"}, 4},
		{limiter.Limit{Rate: 3, Period: time.Second, Burst: 10, Name: "q"}, perSecond, 6},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s to %s", c.from, c.to), func(t *testing.T) {
			_, st := newMini(t)
			lim := newLim(t, st, strategy.NewTokenBucket())
			if r, err := lim.AllowN(ctx, "u", c.use, c.from); err != nil || !r.Allowed {
				t.Fatalf("AllowN(%d) = %+v, %v", c.use, r, err)
			}
			left := c.from.Rate - c.use
			if c.from.Burst > 0 {
				left = c.from.Burst - c.use
			}
			// the tokens left, one by one, and not one more
			for i := range left {
				r, err := lim.Allow(ctx, "u", c.to)
				if err != nil || !r.Allowed || r.Remaining != left-1-i {
					t.Fatalf("call %d under %s with %d tokens left = %+v, %v; want admitted, %d left", i+1, c.to, left, r, err, left-1-i)
				}
			}
			if r, err := lim.Allow(ctx, "u", c.to); err != nil || r.Allowed {
				t.Errorf("call %d under %s = %+v, %v; want denied: only %d tokens were left", left+1, c.to, r, err, left)
			}
		})
	}
}

// TestTokenBucketRuleChangeDenied: a bucket emptied under a fast rule
// (its key expiring when that rule would have refilled it) and then
// denied under a slow one for the same key stays empty after the fast
// rule's refill time: the denial stores it in the slow rule's scale and
// expiry. Kept in the fast rule's expiry, the key expired and the slow
// rule found a full bucket. Every pair of the two forms: intervals of
// whole milliseconds (10/s, 10/day) and not (3 per 7s, 7/day).
func TestTokenBucketRuleChangeDenied(t *testing.T) {
	ctx := context.Background()
	fast := []limiter.Limit{{Rate: 10, Period: time.Second, Name: "q"}, {Rate: 3, Period: 7 * time.Second, Name: "q"}}
	slow := []limiter.Limit{{Rate: 10, Period: 24 * time.Hour, Name: "q"}, {Rate: 7, Period: 24 * time.Hour, Name: "q"}}
	for _, from := range fast {
		for _, to := range slow {
			t.Run(fmt.Sprintf("%s to %s", from, to), func(t *testing.T) {
				m, st := newMini(t)
				lim := newLim(t, st, strategy.NewTokenBucket())
				if r, err := lim.AllowN(ctx, "u", from.Rate, from); err != nil || !r.Allowed || r.Remaining != 0 {
					t.Fatalf("AllowN(%d) under %s = %+v, %v; want admitted, 0 left", from.Rate, from, r, err)
				}
				if r, err := lim.Allow(ctx, "u", to); err != nil || r.Allowed {
					t.Fatalf("first call under %s = %+v, %v; want denied: the bucket is empty", to, r, err)
				}
				// past the time the fast rule's bucket is full again
				m.Advance(from.Period + time.Millisecond)
				if r, err := lim.Allow(ctx, "u", to); err != nil || r.Allowed {
					t.Errorf("under %s, %s after emptying = %+v, %v; want denied: a token takes %s", to, from.Period+time.Millisecond, r, err, to.Period/time.Duration(to.Rate))
				}
			})
		}
	}
}

// TestTokenBucketRateChangeSamePeriod: a bucket of an interval that is not
// whole milliseconds, emptied under 7/s and denied under 3/s (the same
// period, burst 3): the denial gives the key the slower rule's expiry (1 s
// until full, not 7/s's 429 ms), so 430 ms later the bucket holds the one
// token 3/s refilled, not a full bucket found after the key expired.
func TestTokenBucketRateChangeSamePeriod(t *testing.T) {
	ctx := context.Background()
	fast := limiter.Limit{Rate: 7, Period: time.Second, Burst: 3, Name: "q"}
	slow := limiter.Limit{Rate: 3, Period: time.Second, Burst: 3, Name: "q"}
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewTokenBucket())
	key, _ := limiter.Key("t", "u", slow)
	if r, err := lim.AllowN(ctx, "u", 3, fast); err != nil || !r.Allowed || r.ResetAfter != 429*time.Millisecond {
		t.Fatalf("AllowN(3) under %s = %+v, %v; want admitted, full in 429ms", fast, r, err)
	}
	if r, err := lim.Allow(ctx, "u", slow); err != nil || r.Allowed || r.RetryAfter != 334*time.Millisecond {
		t.Fatalf("under %s = %+v, %v; want denied, retry in 334ms", slow, r, err)
	}
	if ttl := pttl(t, m, key); ttl != time.Second {
		t.Errorf("TTL after the denial under %s: %s; want 1s (until full at 3/s)", slow, ttl)
	}
	m.Advance(430 * time.Millisecond)
	if r, err := lim.AllowN(ctx, "u", 2, slow); err != nil || r.Allowed || r.Remaining != 1 {
		t.Errorf("AllowN(2) under %s 430ms later = %+v, %v; want denied, 1 left", slow, r, err)
	}
	if r, err := lim.Allow(ctx, "u", slow); err != nil || !r.Allowed {
		t.Errorf("Allow under %s 430ms later = %+v, %v; want admitted", slow, r, err)
	}
}
