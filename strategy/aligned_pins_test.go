package strategy_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// alignedAt is an AlignedWindow Limiter on a miniredis whose clock starts
// at start (Unix ms), through go-redis (rdb, for reading its keys), on an
// app clock that is the server's moved by skew.
func alignedAt(t *testing.T, start int64) (*wMini, *redis.Client, *limiter.Limiter, *atomic.Int64) {
	t.Helper()
	m := newWMini(t, time.UnixMilli(start))
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	skew := new(atomic.Int64)
	app := func() time.Time { return m.Now().Add(time.Duration(skew.Load())) }
	return m, rdb, newLim(t, goredis.New(rdb), strategy.NewAlignedWindow(strategy.WithAlignedClock(app))), skew
}

// A call named from an estimate 1 ms behind, reaching the server in the
// first millisecond of a window, would create the counter of the window that
// just ended: the script answers "another window" (the server's clock,
// (b+1)·p, is outside [b·p, (b+1)·p)), and the call is counted in the
// server's window, with its full ResetAfter.
func TestAlignedCreateAtWindowEnd(t *testing.T) {
	const p = 60_000
	start := int64(29_000_000)*p + p/2
	m, rdb, lim, skew := alignedAt(t, start)
	ctx := context.Background()
	l := limiter.PerMinute(5)
	if r, err := lim.Allow(ctx, "warm", l); err != nil || !r.Allowed {
		t.Fatalf("warm-up: %+v, %v", r, err)
	}
	m.Advance(p / 2 * time.Millisecond) // the next window's first millisecond
	skew.Store(int64(-time.Millisecond))
	r, err := lim.Allow(ctx, "u", l)
	if err != nil || !r.Allowed || r.Remaining != 4 || r.ResetAfter != time.Minute {
		t.Errorf("Allow in a window's first millisecond = %+v, %v; want admitted, 4 remaining, ResetAfter 1m", r, err)
	}
	b := (start + p/2) / p
	k, _ := limiter.Key("t", "u", l)
	if n, _ := rdb.Exists(ctx, strategy.AlignedWindowKey(k, time.Minute, b-1)).Result(); n != 0 {
		t.Errorf("the counter of the window that ended was created")
	}
}

// A peek named from an estimate 1 ms behind, reaching the server in a
// window's first millisecond, finds no counter of the window that ended:
// the server's clock is outside it, so the script answers "another window"
// and the peek reads the server's window.
func TestAlignedPeekAtWindowStart(t *testing.T) {
	const p = 60_000
	start := int64(29_000_000) * p
	_, _, lim, skew := alignedAt(t, start)
	ctx := context.Background()
	l := limiter.PerMinute(5)
	for range 2 {
		if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed {
			t.Fatalf("Allow: %+v, %v", r, err)
		}
	}
	skew.Store(int64(-time.Millisecond))
	r, err := lim.Peek(ctx, "u", l)
	if err != nil || !r.Allowed || r.Remaining != 3 || r.ResetAfter != time.Minute {
		t.Errorf("Peek = %+v, %v; want allowed, 3 remaining, ResetAfter 1m", r, err)
	}
}

// A call denied as corrupt by its third limit leaves the first two limits'
// counters as it found them (Lua header: "every counter is left as it was
// found").
func TestAlignedCorruptThirdLimitRollsBack(t *testing.T) {
	for _, bad := range []string{"4503599627370499", "hash"} {
		t.Run(bad, func(t *testing.T) {
			const p = 60_000
			start := int64(29_000_000)*p + 1000
			_, rdb, lim, _ := alignedAt(t, start)
			ctx := context.Background()
			ls := []limiter.Limit{limiter.PerMinute(5).Named("a"), limiter.PerMinute(5).Named("b"), limiter.PerMinute(5).Named("c")}
			if r, err := lim.Allow(ctx, "u", ls...); err != nil || !r.Allowed {
				t.Fatalf("Allow: %+v, %v", r, err)
			}
			var keys []string
			for _, l := range ls {
				k, _ := limiter.Key("t", "u", l)
				keys = append(keys, strategy.AlignedWindowKey(k, time.Minute, start/p))
			}
			if bad == "hash" {
				rdb.Del(ctx, keys[2])
				rdb.HSet(ctx, keys[2], "f", "v")
			} else {
				rdb.Set(ctx, keys[2], bad, time.Minute)
			}
			if _, err := lim.Allow(ctx, "u", ls...); err == nil {
				t.Fatal("Allow with a corrupt third counter: no error")
			}
			for _, k := range keys[:2] {
				if v, _ := rdb.Get(ctx, k).Result(); v != "4503599627370495" {
					t.Errorf("%s holds %q after the call; want 4503599627370495 (count 1), as found", k, v)
				}
			}
		})
	}
}

// A counter found above AlignedCountBase (a count below zero) is
// ErrCorruptCounter and left as it was found (aligned_window.go's
// Guarantees; the Lua header: "A counter found above 2^52 ... is an error
// too, and left as it was"), whatever the cost.
func TestAlignedAboveBaseLeftAsFound(t *testing.T) {
	for _, cost := range []int64{1, 2, 3} {
		t.Run(fmt.Sprint("cost=", cost), func(t *testing.T) {
			const p = 60_000
			start := int64(29_000_000)*p + 1000
			_, rdb, lim, _ := alignedAt(t, start)
			ctx := context.Background()
			l := limiter.PerMinute(5)
			k, _ := limiter.Key("t", "u", l)
			key := strategy.AlignedWindowKey(k, time.Minute, start/p)
			const found = "4503599627370497" // 2^52 + 1: a count of -1
			rdb.Set(ctx, key, found, time.Minute)
			r, err := lim.AllowN(ctx, "u", cost, l)
			if !errors.Is(err, limiter.ErrCorruptCounter) {
				t.Errorf("AllowN(%d) on a counter at 2^52+1 = %+v, %v; want ErrCorruptCounter", cost, r, err)
			}
			if v, _ := rdb.Get(ctx, key).Result(); v != found {
				t.Errorf("the counter holds %s after the call; want %s, as found", v, found)
			}
			// AllowMany's many-request script, beside another subject's ask
			as := lim.AllowMany(ctx, []limiter.Ask{{Key: "u", Cost: cost, Limits: []limiter.Limit{l}}, {Key: "w", Cost: cost, Limits: []limiter.Limit{l}}})
			if !errors.Is(as[0].Err, limiter.ErrCorruptCounter) || as[1].Err != nil || !as[1].Result.Allowed {
				t.Errorf("AllowMany of %d on a counter at 2^52+1, and on another subject = %+v, %+v; want ErrCorruptCounter, and the other admitted", cost, as[0], as[1])
			}
			if v, _ := rdb.Get(ctx, key).Result(); v != found {
				t.Errorf("the counter holds %s after AllowMany; want %s, as found", v, found)
			}
		})
	}
}

// A counter at exactly AlignedCountBase (a count of 0: a non-negative
// count, not above the base) is a valid counter: the call is counted on it,
// on the general path (two limits) as on the common one.
func TestAlignedCounterAtBase(t *testing.T) {
	const p = 60_000
	start := int64(29_000_000)*p + 1000
	_, rdb, lim, _ := alignedAt(t, start)
	ctx := context.Background()
	ls := []limiter.Limit{limiter.PerMinute(5).Named("a"), limiter.PerMinute(5).Named("b")}
	for _, l := range ls {
		k, _ := limiter.Key("t", "u", l)
		rdb.Set(ctx, strategy.AlignedWindowKey(k, time.Minute, start/p), "4503599627370496", time.Minute)
	}
	if r, err := lim.AllowN(ctx, "u", 2, ls...); err != nil || !r.Allowed || r.Remaining != 3 {
		t.Errorf("AllowN(2) on counters at 2^52 = %+v, %v; want admitted, 3 remaining", r, err)
	}
}
