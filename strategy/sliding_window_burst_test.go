package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestSlidingWindowIgnoresBurst: SlidingWindow ignores Burst, so a limit
// with a Burst decides and reports exactly as the same limit without one
// (its one-limit packed reply is read with radix Rate + 1).
func TestSlidingWindowIgnoresBurst(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewSlidingWindow())
	ctx := context.Background()
	plain := limiter.Limit{Rate: 10, Period: time.Second}
	for _, burst := range []int64{3, 50} {
		withBurst := limiter.Limit{Rate: 10, Period: time.Second, Burst: burst}
		for i := range 11 {
			a, errA := lim.Allow(ctx, "plain", plain)
			b, errB := lim.Allow(ctx, "burst", withBurst)
			if errA != nil || errB != nil || a.Allowed != b.Allowed || a.Remaining != b.Remaining || a.ResetAfter != b.ResetAfter || a.RetryAfter != b.RetryAfter {
				t.Fatalf("burst %d, call %d: %+v, %v with Burst; %+v, %v without", burst, i, b, errB, a, errA)
			}
			if i < 10 && (!b.Allowed || b.Remaining != int64(9-i)) {
				t.Fatalf("burst %d, call %d: %+v; want admitted, %d left", burst, i, b, 9-i)
			}
		}
		m.Advance(3 * time.Second)
	}
	// and so through AllowMany, one ask and several
	for _, n := range []int{1, 2} {
		for i := range 11 {
			asks := []limiter.Ask{{Key: "many-plain", Limits: []limiter.Limit{plain}}, {Key: "many-burst", Limits: []limiter.Limit{{Rate: 10, Period: time.Second, Burst: 3}}}}
			var a, b limiter.Answer
			if n == 1 {
				a, b = lim.AllowMany(ctx, asks[:1])[0], lim.AllowMany(ctx, asks[1:])[0]
			} else {
				as := lim.AllowMany(ctx, asks)
				a, b = as[0], as[1]
			}
			if a.Err != nil || b.Err != nil || a.Result.Allowed != b.Result.Allowed || a.Result.Remaining != b.Result.Remaining || a.Result.ResetAfter != b.Result.ResetAfter || a.Result.RetryAfter != b.Result.RetryAfter {
				t.Fatalf("AllowMany of %d, call %d: %+v with Burst; %+v without", n, i, b, a)
			}
			if i < 10 && (!b.Result.Allowed || b.Result.Remaining != int64(9-i)) {
				t.Fatalf("AllowMany of %d, call %d: %+v; want admitted, %d left", n, i, b, 9-i)
			}
		}
		m.Advance(3 * time.Second)
	}
}
