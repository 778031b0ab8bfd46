package strategy_test

import (
	"context"
	"errors"
	"strconv"
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
	// the state: previous·2^27 + count (the window's position is the key's
	// expiry)
	state := func(c, p int) string { return strconv.Itoa(p<<27 + c) }
	step := func(name string, cost int64, allowed bool, remaining int64, reset, retry time.Duration) {
		t.Helper()
		r, err := lim.AllowN(ctx, "s", cost, l)
		if err != nil || r.Allowed != allowed || r.Remaining != remaining || r.ResetAfter != reset || r.RetryAfter != retry {
			t.Fatalf("%s: AllowN(%d) = %+v, %v; want allowed %v, remaining %d, reset %s, retry %s", name, cost, r, err, allowed, remaining, reset, retry)
		}
	}
	step("fresh", 10, true, 0, 2*time.Second, 0)
	if v, _ := m.Get(key); v != state(10, 0) {
		t.Fatalf("state %q, want %q", v, state(10, 0))
	}
	if ttl := pttl(t, m, key); ttl != 2*time.Second {
		t.Errorf("TTL %s, want 2s (the count weighs until the next window ends)", ttl)
	}
	// Full: fits 100 ms into the next window, when 10·(1000−e)/1000 ≤ 9.
	step("full", 1, false, 0, 2*time.Second, 1100*time.Millisecond)
	step("never", 11, false, 0, 2*time.Second, -1)
	m.Advance(1100 * time.Millisecond)
	step("next window at 100ms", 1, true, 0, 1900*time.Millisecond, 0)
	if v, _ := m.Get(key); v != state(1, 10) {
		t.Fatalf("state %q, want %q (window moved, count carried)", v, state(1, 10))
	}
	if ttl := pttl(t, m, key); ttl != 1900*time.Millisecond {
		t.Errorf("TTL %s, want 1.9s (the end of the window after this one)", ttl)
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

// TestSlidingWindowInvalid: a limit whose rate does not fit the state
// (2^26 or more) or whose rate × period is too large to compare exactly is
// refused before any I/O; the largest that fit are decided.
func TestSlidingWindowInvalid(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewSlidingWindow())
	for _, l := range []limiter.Limit{limiter.PerSecond(1 << 26), limiter.Per(1<<25, 1<<27*time.Millisecond)} {
		if r, err := lim.Allow(context.Background(), "x", l); !errors.Is(err, limiter.ErrInvalidLimit) {
			t.Fatalf("%s: %+v, %v; want ErrInvalidLimit", l, r, err)
		}
		if keys := m.Keys(); len(keys) != 0 {
			t.Errorf("refused call wrote %q", keys)
		}
	}
	for _, l := range []limiter.Limit{limiter.PerSecond(1<<26 - 1), limiter.Per(1<<25, 1<<26*time.Millisecond)} {
		if r, err := lim.AllowN(context.Background(), "ok", l.Rate, l); err != nil || !r.Allowed || r.Remaining != 0 {
			t.Errorf("%s: AllowN(Rate) = %+v, %v; want admitted, 0 left", l, r, err)
		}
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
	// (a count of 2^26 or more, or one that wraps into the previous count,
	// is no state this script writes)
	for _, bad := range []string{"1:2", "1:2:3", "-1", "1.5", "1e3", "0x1", "007", " 3", "3 ", "", "a", "9007199254740992", "12345678901234567", "67108864", "134217727"} {
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
	// (the values INCR refuses on miniredis too, and those it accepts but
	// the script does not: below zero, beyond 2^53 - 1, a count of 2^26 or
	// more, a count of 2^27 - 1 that INCR carries into the previous one)
	for _, bad := range []string{"1:2", "x", "1.5", "", "123456789012345678901234", "-5", "9007199254740992", "67108864", "134217727"} {
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
// every digit of counts near 2^26 packed near 2^53 (Lua's default number
// formatting would write 9.0071991205233e+15), and the next call reads it
// back; a window's count becomes the previous one when the window ends.
func TestSlidingWindowRealServer(t *testing.T) {
	rdb := realServer(t)
	lim := newLim(t, goredis.New(rdb), strategy.NewSlidingWindow())
	ctx := context.Background()
	const rate = 1<<26 - 1
	l := limiter.Per(rate, 500*time.Millisecond)
	key, _ := limiter.Key("t", "real", l)
	if r, err := lim.AllowN(ctx, "real", rate, l); err != nil || !r.Allowed || r.Remaining != 0 {
		t.Fatalf("AllowN(2^26 - 1) = %+v, %v", r, err)
	}
	if v, err := rdb.Get(ctx, key).Result(); err != nil || v != strconv.Itoa(rate) {
		t.Fatalf("state %q (%v), want %d", v, err, rate)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 900*time.Millisecond || ttl > time.Second {
		t.Errorf("PTTL %s, want about 1s (two Periods)", ttl)
	}
	if r, err := lim.Allow(ctx, "real", l); err != nil || r.Allowed || r.Remaining != 0 {
		t.Fatalf("one unit over = %+v, %v; want denied", r, err)
	}
	// The next window: the full count weighs (P-e)/P, so a unit fits from
	// e = 1 ms on (1·P + R·(P−e) ≤ R·P).
	time.Sleep(550 * time.Millisecond)
	r, err := lim.Allow(ctx, "real", l)
	if err != nil || !r.Allowed {
		t.Fatalf("Allow in the next window = %+v, %v; want admitted", r, err)
	}
	want := strconv.FormatInt(int64(rate)<<27+1, 10) // 9007199120523265
	if v, err := rdb.Get(ctx, key).Result(); err != nil || v != want {
		t.Fatalf("state %q (%v), want %s (previous 2^26 - 1, count 1)", v, err, want)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 400*time.Millisecond || ttl > time.Second {
		t.Errorf("PTTL %s, want the end of the window after this one", ttl)
	}
	// read back: one more unit is decided on it
	if _, err := lim.Allow(ctx, "real", l); err != nil {
		t.Fatalf("Allow on the packed state: %v", err)
	}
}
