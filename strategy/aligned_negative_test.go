package strategy_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestAlignedNegativeLeftAsFound: a counter found negative (not written by
// the script: it holds 2^52 - count, at least 2^51) is ErrCorruptCounter
// and left as found, with one limit (the common call's DECR or DECRBY
// falls to the general path) and as the second of two; it is not taken
// for a counter the call created.
func TestAlignedNegativeLeftAsFound(t *testing.T) {
	for _, two := range []bool{false, true} {
		for _, cost := range []int64{1, 2} {
			t.Run(fmt.Sprint("two=", two, ",cost=", cost), func(t *testing.T) {
				const p = 60_000
				start := int64(29_000_000)*p + 1000
				_, rdb, lim, _ := alignedAt(t, start)
				ctx := context.Background()
				l := limiter.PerMinute(5)
				ls := []limiter.Limit{l}
				if two {
					ls = []limiter.Limit{limiter.PerMinute(7).Named("other"), l}
				}
				k, _ := limiter.Key("t", "u", l)
				key := strategy.AlignedWindowKey(k, time.Minute, start/p)
				const found = "-3"
				rdb.Set(ctx, key, found, time.Minute)
				r, err := lim.AllowN(ctx, "u", cost, ls...)
				if !errors.Is(err, limiter.ErrCorruptCounter) {
					t.Errorf("AllowN(%d) on a counter at -3 = %+v, %v; want ErrCorruptCounter", cost, r, err)
				}
				if v, _ := rdb.Get(ctx, key).Result(); v != found {
					t.Errorf("the counter holds %s after the call; want %s, as found", v, found)
				}
				// AllowMany's many-request script, beside another subject's ask
				as := lim.AllowMany(ctx, []limiter.Ask{{Key: "u", Cost: cost, Limits: ls}, {Key: "w", Cost: cost, Limits: ls}})
				if !errors.Is(as[0].Err, limiter.ErrCorruptCounter) || as[1].Err != nil || !as[1].Result.Allowed {
					t.Errorf("AllowMany of %d on a counter at -3, and on another subject = %+v, %+v; want ErrCorruptCounter, and the other admitted", cost, as[0], as[1])
				}
				if v, _ := rdb.Get(ctx, key).Result(); v != found {
					t.Errorf("the counter holds %s after AllowMany; want %s, as found", v, found)
				}
				if two {
					ko, _ := limiter.Key("t", "u", ls[0])
					if n := rdb.Exists(ctx, strategy.AlignedWindowKey(ko, time.Minute, start/p)).Val(); n != 0 {
						t.Errorf("the other limit's counter was left behind")
					}
				}
			})
		}
	}
}
