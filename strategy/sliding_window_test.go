package strategy_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// TestSlidingWindowWeighted walks a limit of 10 per second on miniredis'
// virtual clock: the previous window's count weighs by the part of it the
// last second still covers, and RetryAfter, ResetAfter, Remaining and the
// key's TTL follow the formula to the millisecond.
func TestSlidingWindowWeighted(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewSlidingWindow())
	ctx := context.Background()
	l := limiter.PerSecond(10)
	key, _ := limiter.Key("t", "s", l)
	start := m.Now().UnixMilli()
	state := func(s int64, c, p int) string { return fmt.Sprintf("%d:%d:%d", start+s, c, p) }
	step := func(name string, cost int64, allowed bool, remaining int64, reset, retry time.Duration) {
		t.Helper()
		r, err := lim.AllowN(ctx, "s", cost, l)
		if err != nil || r.Allowed != allowed || r.Remaining != remaining || r.ResetAfter != reset || r.RetryAfter != retry {
			t.Fatalf("%s: AllowN(%d) = %+v, %v; want allowed %v, remaining %d, reset %s, retry %s", name, cost, r, err, allowed, remaining, reset, retry)
		}
	}
	step("fresh", 10, true, 0, 2*time.Second, 0)
	if v, _ := m.Get(key); v != state(0, 10, 0) {
		t.Fatalf("state %q, want %q", v, state(0, 10, 0))
	}
	if ttl := pttl(t, m, key); ttl != 2*time.Second {
		t.Errorf("TTL %s, want 2s (the count weighs until the next window ends)", ttl)
	}
	// Full: fits 100 ms into the next window, when 10·(1000−e)/1000 ≤ 9.
	step("full", 1, false, 0, 2*time.Second, 1100*time.Millisecond)
	step("never", 11, false, 0, 2*time.Second, -1)
	m.Advance(1100 * time.Millisecond)
	step("next window at 100ms", 1, true, 0, 1900*time.Millisecond, 0)
	if v, _ := m.Get(key); v != state(1000, 1, 10) {
		t.Fatalf("state %q, want %q (window moved, count carried)", v, state(1000, 1, 10))
	}
	// 1 + 1 + 10·(1000−e)/1000 ≤ 10 from e = 200 ms.
	step("weighted", 1, false, 0, 1900*time.Millisecond, 100*time.Millisecond)
	m.Advance(99 * time.Millisecond)
	step("1ms early", 1, false, 0, 1801*time.Millisecond, time.Millisecond)
	m.Advance(time.Millisecond)
	step("on time", 1, true, 0, 1800*time.Millisecond, 0)
	m.Advance(500 * time.Millisecond) // e = 700: 2 + 3 ≤ 10
	step("later", 5, true, 0, 1300*time.Millisecond, 0)
	if ttl := pttl(t, m, key); ttl != 1300*time.Millisecond {
		t.Errorf("TTL %s, want 1.3s", ttl)
	}
	// A window later with nothing in between the count of 7 weighs only.
	m.Advance(1300*time.Millisecond - time.Millisecond)
	step("last ms", 0, true, 9, time.Millisecond, 0)
	m.Advance(time.Millisecond)
	if m.Exists(key) {
		t.Errorf("key %q outlived its weighted count", key)
	}
	step("idle", 10, true, 0, 2*time.Second, 0)
}

// TestSlidingWindowPeek: a dry run decides without writing.
func TestSlidingWindowPeek(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewSlidingWindow())
	ctx := context.Background()
	l := limiter.PerMinute(3)
	if r, err := lim.Peek(ctx, "p", l); err != nil || !r.Allowed || r.Remaining != 3 || r.ResetAfter != 0 {
		t.Fatalf("Peek of a fresh limit = %+v, %v", r, err)
	}
	if keys := m.Keys(); len(keys) != 0 {
		t.Fatalf("Peek wrote %q", keys)
	}
	if _, err := lim.AllowN(ctx, "p", 3, l); err != nil {
		t.Fatal(err)
	}
	if r, err := lim.Peek(ctx, "p", l); err != nil || r.Allowed || r.RetryAfter != time.Minute+20*time.Second {
		t.Fatalf("Peek of a full limit = %+v, %v; want denied, retry after 80s", r, err)
	}
}

// TestSlidingWindowInvalid: a limit whose rate × period is too large to
// compare exactly is refused before any I/O.
func TestSlidingWindowInvalid(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewSlidingWindow())
	l := limiter.Per(1<<40, time.Hour)
	if r, err := lim.Allow(context.Background(), "x", l); !errors.Is(err, limiter.ErrInvalidLimit) {
		t.Fatalf("%s: %+v, %v; want ErrInvalidLimit", l, r, err)
	}
	if keys := m.Keys(); len(keys) != 0 {
		t.Errorf("refused call wrote %q", keys)
	}
}

// TestSlidingWindowCorrupt: a key that holds no sliding window state is
// ErrCorruptCounter and nothing is written to any limit.
func TestSlidingWindowCorrupt(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewSlidingWindow())
	ctx := context.Background()
	a, b := limiter.PerSecond(5), limiter.PerMinute(50)
	ka, _ := limiter.Key("t", "c", a)
	kb, _ := limiter.Key("t", "c", b)
	for _, bad := range []string{"1", "1:2", "1:2:3:4", "1:-2:3", "1:2:03", "a:b:c", "", "1:2:12345678901234567", "1:2:9007199254740993"} {
		if err := m.Set(kb, bad); err != nil {
			t.Fatal(err)
		}
		if r, err := lim.Allow(ctx, "c", a, b); !errors.Is(err, limiter.ErrCorruptCounter) {
			t.Errorf("state %q: %+v, %v; want ErrCorruptCounter", bad, r, err)
		}
		if m.Exists(ka) {
			t.Fatalf("state %q: the other limit's key was written", bad)
		}
		if v, _ := m.Get(kb); v != bad {
			t.Fatalf("state %q became %q", bad, v)
		}
	}
}

// TestSlidingWindowCorruptOneLimit: the single-limit path refuses what the
// general one does.
func TestSlidingWindowCorruptOneLimit(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewSlidingWindow())
	l := limiter.PerMinute(50)
	k, _ := limiter.Key("t", "c", l)
	for _, bad := range []string{"1:2:03", "1:02:3", "01:2:3", "1:2", "1:2:x", "1:2:12345678901234567", "99999999999999999:1:1"} {
		if err := m.Set(k, bad); err != nil {
			t.Fatal(err)
		}
		if r, err := lim.Allow(context.Background(), "c", l); !errors.Is(err, limiter.ErrCorruptCounter) {
			t.Errorf("state %q: %+v, %v; want ErrCorruptCounter", bad, r, err)
		}
		if v, _ := m.Get(k); v != bad {
			t.Fatalf("state %q became %q", bad, v)
		}
	}
}

// TestSlidingWindowRealServer: on a real redis-server the state keeps
// every digit of large counts (Lua's default number formatting would write
// 1.0995116277760e+12) and the next call reads it back.
func TestSlidingWindowRealServer(t *testing.T) {
	rdb := realServer(t)
	lim := newLim(t, goredis.New(rdb), strategy.NewSlidingWindow())
	ctx := context.Background()
	l := limiter.Per(1<<41, time.Second) // 2^41 × 1000 ms < 2^51
	cost := int64(1 << 40)
	before, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if r, err := lim.AllowN(ctx, "real", cost, l); err != nil || !r.Allowed || r.Remaining != l.Rate-cost {
		t.Fatalf("AllowN(2^40) = %+v, %v", r, err)
	}
	after, _ := rdb.Time(ctx).Result()
	key, _ := limiter.Key("t", "real", l)
	v, err := rdb.Get(ctx, key).Result()
	parts := strings.Split(v, ":")
	if err != nil || len(parts) != 3 || parts[1] != strconv.FormatInt(cost, 10) || parts[2] != "0" {
		t.Fatalf("state %q (%v), want start:%d:0", v, err, cost)
	}
	if s, err := strconv.ParseInt(parts[0], 10, 64); err != nil || s < before.UnixMilli() || s > after.UnixMilli() {
		t.Fatalf("window start %q, want in [%d, %d]", parts[0], before.UnixMilli(), after.UnixMilli())
	}
	if r, err := lim.AllowN(ctx, "real", l.Rate-cost+1, l); err != nil || r.Allowed || r.Remaining != l.Rate-cost {
		t.Fatalf("one unit over = %+v, %v; want denied with %d remaining", r, err, l.Rate-cost)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= time.Second || ttl > 2*time.Second {
		t.Errorf("PTTL %s, want about 2s", ttl)
	}
}
