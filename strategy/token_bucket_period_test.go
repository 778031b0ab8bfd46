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
