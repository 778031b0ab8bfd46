package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
	"github.com/redis/go-redis/v9"
)

// A GCRA limit whose TAT is more than 31 years ahead is kept on TIME's
// clock and read back as up to 2 ms later. On miniredis TIME and the
// expiry clock are the same clock, and the clock never moves here: each
// admitted call moves the TAT by exactly its cost, give or take that 2 ms
// once; an admission that wrote the read's slack back into the TAT would
// lose 2 ms more with every call.
func TestGCRAEpochFormKeepsNoSlack(t *testing.T) {
	_, lim, _ := gcraOnMini(t)
	ctx := context.Background()
	cases := []struct {
		l     limiter.Limit
		first int64
	}{
		// 1 unit per µs; a burst of 2^50 µs (35.7 years)
		{limiter.Limit{Rate: 1000, Period: time.Millisecond, Burst: 1 << 50, Name: "us"}, 1<<50 - 100_000},
		// 7 per 31 days (382 628 571 429 µs each), refilled in 70 years
		{limiter.Limit{Rate: 7, Period: 31 * 24 * time.Hour, Burst: 5800, Name: "month"}, 5000},
	}
	for _, c := range cases {
		r0, err := lim.AllowN(ctx, "s", c.first, c.l)
		if err != nil || !r0.Allowed {
			t.Fatalf("%v: first call %+v %v", c.l, r0, err)
		}
		interval := (c.l.Period.Microseconds() + c.l.Rate - 1) / c.l.Rate
		for i := int64(1); i <= 5; i++ {
			r, err := lim.Allow(ctx, "s", c.l)
			if err != nil || !r.Allowed {
				t.Fatalf("%v: call %d %+v %v", c.l, i, r, err)
			}
			// the TAT moved by exactly i intervals, the clock did not move
			// (allowing the documented read-back slack of up to 2 ms)
			maxReset := r0.ResetAfter + time.Duration((i*interval+999)/1000)*time.Millisecond + 2*time.Millisecond
			minRem := r0.Remaining - i - (2000+interval-1)/interval
			if r.Remaining < minRem || r.ResetAfter > maxReset {
				t.Errorf("%v: call %d (cost 1, clock still): Remaining %d, ResetAfter %s; want at least %d, at most %s",
					c.l, i, r.Remaining, r.ResetAfter, minRem, maxReset)
			}
		}
	}
}

// The same on a real redis-server: 50 calls of cost 1 take 50 units (and
// at most the 2 ms of one read's slack).
func TestGCRAEpochFormKeepsNoSlackRedis(t *testing.T) {
	rdb := realServer(t)
	lim, err := limiter.New(goredis.New(rdb), strategy.NewGCRA(), limiter.WithPrefix("t"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l := limiter.Limit{Rate: 1000, Period: time.Millisecond, Burst: 1 << 50}
	r0, err := lim.AllowN(ctx, "s", 1<<50-1_000_000, l)
	if err != nil || !r0.Allowed {
		t.Fatal(r0, err)
	}
	var r limiter.Result
	for i := 0; i < 50; i++ {
		r, err = lim.Allow(ctx, "s", l)
		if err != nil || !r.Allowed {
			t.Fatal(i, r, err)
		}
	}
	// 50 units taken; quota only came back meanwhile; 2 ms (2000 units) of read slack allowed
	if min := r0.Remaining - 50 - 2000; r.Remaining < min {
		t.Errorf("after 50 calls of cost 1: Remaining %d, want at least %d (started at %d)", r.Remaining, min, r0.Remaining)
	}
}

// gcraOnMini is GCRA (prefix "t") through go-redis on a miniredis whose
// clock stands still at now, a whole second.
func gcraOnMini(t *testing.T) (*redis.Client, *limiter.Limiter, time.Time) {
	t.Helper()
	m := miniredis.NewMiniRedis()
	now := time.Now().Truncate(time.Second)
	m.SetTime(now)
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	lim, err := limiter.New(goredis.New(rdb), strategy.NewGCRA(), limiter.WithPrefix("t"))
	if err != nil {
		t.Fatal(err)
	}
	return rdb, lim, now
}
