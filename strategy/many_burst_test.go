package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestAllowManyBurstApartFromRate: through AllowMany, one ask or several,
// GCRA and TokenBucket read a limit's reply with its Burst, not its Rate:
// 10/s with burst 3 admits 3 at once, with 2, 1, 0 left, full again
// 100 ms after each unit.
func TestAllowManyBurstApartFromRate(t *testing.T) {
	for _, s := range []limiter.Strategy{strategy.NewGCRA(), strategy.NewTokenBucket()} {
		for _, burst := range []int64{3, 40} {
			for _, n := range []int{1, 2} {
				_, st := newMini(t)
				lim := newLim(t, st, s)
				ctx := context.Background()
				l := limiter.Limit{Rate: 10, Period: time.Second, Burst: burst}
				for i := range burst + 1 {
					asks := []limiter.Ask{{Key: "b", Limits: []limiter.Limit{l}}, {Key: "other", Limits: []limiter.Limit{limiter.PerSecond(1000)}}}
					a := lim.AllowMany(ctx, asks[:n])[0]
					want := i < burst
					if a.Err != nil || a.Result.Allowed != want {
						t.Fatalf("%T burst %d, %d asks, call %d: %+v; want allowed %v", s, burst, n, i, a, want)
					}
					if want && (a.Result.Remaining != burst-1-i || a.Result.ResetAfter != time.Duration(i+1)*100*time.Millisecond) {
						t.Fatalf("%T burst %d, %d asks, call %d: %+v; want %d left, full in %dms", s, burst, n, i, a.Result, burst-1-i, (i+1)*100)
					}
				}
			}
		}
	}
}
