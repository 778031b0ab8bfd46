package strategy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// TestSlidingLogExact walks a limit of 3 per second on miniredis' virtual
// clock: units of one instant are all kept, a unit leaves exactly one
// Period after it was admitted, and RetryAfter, ResetAfter and the key's
// TTL say so.
func TestSlidingLogExact(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewSlidingLog())
	ctx := context.Background()
	l := limiter.PerSecond(3)
	key, _ := limiter.Key("t", "s", l)
	// Two units at 0 ms (one instant), one at 400 ms.
	if r, err := lim.AllowN(ctx, "s", 2, l); err != nil || !r.Allowed || r.Remaining != 1 || r.ResetAfter != time.Second {
		t.Fatalf("AllowN(2) = %+v, %v", r, err)
	}
	if n, _ := m.ZMembers(key); len(n) != 2 {
		t.Fatalf("log holds %q, want 2 members for a cost of 2", n)
	}
	m.Advance(400 * time.Millisecond)
	if r, err := lim.Allow(ctx, "s", l); err != nil || !r.Allowed || r.Remaining != 0 {
		t.Fatalf("third unit = %+v, %v", r, err)
	}
	if ttl := pttl(t, m, key); ttl != time.Second {
		t.Errorf("TTL %s, want 1s (one Period after the newest unit)", ttl)
	}
	r, err := lim.Allow(ctx, "s", l)
	if err != nil || r.Allowed || r.RetryAfter != 600*time.Millisecond || r.ResetAfter != time.Second {
		t.Fatalf("fourth unit at 400ms = %+v, %v; want denied, retry after 600ms (the first units leave at 1s)", r, err)
	}
	if r, err := lim.AllowN(ctx, "s", 3, l); err != nil || r.Allowed || r.RetryAfter != time.Second {
		t.Fatalf("cost 3 at 400ms = %+v, %v; want retry after 1s (the unit of 400ms leaves at 1.4s)", r, err)
	}
	if r, err := lim.AllowN(ctx, "s", 4, l); err != nil || r.Allowed || r.RetryAfter != -1 {
		t.Fatalf("cost 4 on 3/s = %+v, %v; want never", r, err)
	}
	m.Advance(599 * time.Millisecond)
	if r, err := lim.Allow(ctx, "s", l); err != nil || r.Allowed || r.RetryAfter != time.Millisecond {
		t.Fatalf("at 999ms = %+v, %v; want denied, retry after 1ms", r, err)
	}
	m.Advance(time.Millisecond)
	if r, err := lim.AllowN(ctx, "s", 2, l); err != nil || !r.Allowed || r.Remaining != 0 {
		t.Fatalf("at 1s, cost 2 = %+v, %v; want admitted (the two first units left)", r, err)
	}
	if n, _ := m.ZMembers(key); len(n) != 3 {
		t.Errorf("log holds %d members after trimming, want 3", len(n))
	}
	m.Advance(time.Second)
	if m.Exists(key) {
		t.Errorf("the log outlived its newest unit's window")
	}
}

// TestSlidingLogAllOrNothing: a denial by one limit adds nothing to the
// others; bad limits and corrupt keys write nothing.
func TestSlidingLogAllOrNothing(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewSlidingLog())
	ctx := context.Background()
	a, b := limiter.PerSecond(5), limiter.PerMinute(2)
	for i := range 3 {
		r, err := lim.Allow(ctx, "m", a, b)
		if err != nil || r.Allowed != (i < 2) {
			t.Fatalf("call %d: %+v, %v", i, r, err)
		}
	}
	ka, _ := limiter.Key("t", "m", a)
	if n, _ := m.ZMembers(ka); len(n) != 2 {
		t.Errorf("the 5/s log holds %d units after a denial by 2/min, want 2", len(n))
	}
	if _, err := lim.Allow(ctx, "big", limiter.PerSecond(strategy.SlidingLogMaxRate+1)); !errors.Is(err, limiter.ErrInvalidLimit) {
		t.Errorf("rate above SlidingLogMaxRate: %v; want ErrInvalidLimit", err)
	}
	kc, _ := limiter.Key("t", "c", b)
	if err := m.Set(kc, "7"); err != nil {
		t.Fatal(err)
	}
	if _, err := lim.Allow(ctx, "c", a, b); !errors.Is(err, limiter.ErrCorruptCounter) {
		t.Errorf("a string where a log belongs: %v; want ErrCorruptCounter", err)
	}
	kca, _ := limiter.Key("t", "c", a)
	if m.Exists(kca) || !m.Exists(kc) {
		t.Errorf("a call that met a corrupt key wrote to another limit")
	}
	for _, k := range m.Keys() {
		if k == "t:{big}:1000ms" {
			t.Errorf("a refused limit reached Redis")
		}
	}
}

// TestSlidingLogRealServer: on a real redis-server, units scored by
// whole microseconds of TIME, and a burst of one instant kept whole.
func TestSlidingLogRealServer(t *testing.T) {
	rdb := realServer(t)
	lim := newLim(t, goredis.New(rdb), strategy.NewSlidingLog())
	ctx := context.Background()
	l := limiter.PerHour(1000)
	before, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if r, err := lim.AllowN(ctx, "real", 999, l); err != nil || !r.Allowed || r.Remaining != 1 {
		t.Fatalf("AllowN(999) = %+v, %v", r, err)
	}
	if r, err := lim.AllowN(ctx, "real", 2, l); err != nil || r.Allowed || r.RetryAfter <= time.Hour-time.Minute {
		t.Fatalf("AllowN(2) with 1 left = %+v, %v; want denied for about an hour", r, err)
	}
	after, _ := rdb.Time(ctx).Result()
	key, _ := limiter.Key("t", "real", l)
	zs, err := rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
	if err != nil || len(zs) != 999 {
		t.Fatalf("log: %d members, %v; want 999", len(zs), err)
	}
	for _, z := range zs {
		if z.Score != float64(int64(z.Score)) || int64(z.Score) < before.UnixMicro() || int64(z.Score) > after.UnixMicro() {
			t.Fatalf("member %v scored %f, want whole microseconds in [%d, %d]", z.Member, z.Score, before.UnixMicro(), after.UnixMicro())
		}
	}
}
