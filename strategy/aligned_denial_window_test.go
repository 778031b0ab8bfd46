package strategy_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// TestAlignedWindowDenialNamedAnotherWindow: two limits, 2 per hour (used
// up) and 1 per 7 s (used up), a millisecond after an hour began, from an
// estimate of the server's clock 3 ms behind: the call names the previous
// hour's window for the hourly limit, creates it (empty) and is denied by
// the 7 s one. It goes again for the server's windows, so its RetryAfter is
// the hour's, and made again that much later it is admitted. (It was not
// sent again: RetryAfter was the 7 s limit's, about 4 s, and the call made
// then was denied for the rest of the hour.)
func TestAlignedWindowDenialNamedAnotherWindow(t *testing.T) {
	var hourStart int64 // an hour's start in the middle of a 7 s window
	for k := int64(499_000); ; k++ {
		if h := k * 3_600_000; h%7000 > 2000 && h%7000 < 5000 {
			hourStart = h
			break
		}
	}
	m := newWMini(t, time.UnixMilli(hourStart+1))
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	var skew atomic.Int64
	app := func() time.Time { return m.Now().Add(time.Duration(skew.Load())) }
	lim := newLim(t, goredis.New(rdb), strategy.NewAlignedWindow(strategy.WithAlignedClock(app)))
	ctx := context.Background()
	hour := limiter.Per(2, time.Hour).Named("hour")
	short := limiter.Per(1, 7*time.Second).Named("short")
	if r, err := lim.AllowN(ctx, "u", 2, hour); err != nil || !r.Allowed {
		t.Fatalf("AllowN(2) under the hour's limit: %+v, %v", r, err)
	}
	if r, err := lim.Allow(ctx, "u", short); err != nil || !r.Allowed {
		t.Fatalf("Allow under the 7 s limit: %+v, %v", r, err)
	}
	m.Advance(time.Millisecond)
	skew.Store(int64(-3 * time.Millisecond))
	r, err := lim.Allow(ctx, "u", hour, short)
	if err != nil || r.Allowed || r.Limit != hour || r.RetryAfter < time.Hour-time.Second {
		t.Fatalf("the call named from an estimate 3 ms behind = %+v, %v; want denied by the hour's limit for nearly an hour", r, err)
	}
	skew.Store(0)
	m.Advance(r.RetryAfter)
	if r2, err := lim.Allow(ctx, "u", hour, short); err != nil || !r2.Allowed {
		t.Errorf("made again RetryAfter (%s) later = %+v, %v; want admitted", r.RetryAfter, r2, err)
	}
}
