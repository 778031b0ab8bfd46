package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestSlidingWindowExpiryRepair: the key's expiry is the sliding window's
// clock. A state found without a TTL (a PERSIST from elsewhere) or with one
// beyond its two Periods (the limit's period was shortened, or a TTL set by
// hand) is read as a window that starts now, its counts kept, which admits
// no more than any position in the window would; a writing call, admitted
// or denied, gives the key its expiry back, and a Peek writes nothing.
func TestSlidingWindowExpiryRepair(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewSlidingWindow())
	ctx := context.Background()
	l := limiter.PerSecond(10)
	key, _ := limiter.Key("t", "s", l)
	check := func(name string, r limiter.Result, err error, allowed bool, remaining int64, retry, ttl time.Duration) {
		t.Helper()
		if err != nil || r.Allowed != allowed || r.Remaining != remaining || r.RetryAfter != retry {
			t.Fatalf("%s: %+v, %v; want allowed %v, remaining %d, retry %s", name, r, err, allowed, remaining, retry)
		}
		if got := pttl(t, m, key); got != ttl {
			t.Fatalf("%s: key TTL %s, want %s", name, got, ttl)
		}
	}

	// 1. 3 counted, no TTL: the fast path's INCR is taken back, and the
	// general path counts the unit in a window that starts now.
	m.Set(key, "3")
	r, err := lim.Allow(ctx, "s", l)
	check("no TTL", r, err, true, 6, 0, 2*time.Second)
	if v, _ := m.Get(key); v != "4" {
		t.Fatalf("state %q, want 4 (the count kept, one unit added once)", v)
	}

	// 2. A TTL of a day: brought back to two Periods.
	m.SetTTL(key, 24*time.Hour)
	r, err = lim.Allow(ctx, "s", l)
	check("TTL of a day", r, err, true, 5, 0, 2*time.Second)

	// 3. A full window without a TTL: a Peek decides and writes nothing,
	// a denied call gives the key its expiry.
	m.Set(key, "10")
	r, err = lim.Peek(ctx, "s", l)
	check("peek, no TTL", r, err, false, 0, 1100*time.Millisecond, 0) // (0: none)
	r, err = lim.Allow(ctx, "s", l)
	check("denied, no TTL", r, err, false, 0, 1100*time.Millisecond, 2*time.Second)
	if v, _ := m.Get(key); v != "10" {
		t.Fatalf("state %q after a denial, want 10", v)
	}

	// 4. Previous 10, nothing counted this window, a TTL of a day (the
	// window ends when the previous count stops weighing): read as the
	// window's start, so the whole previous count weighs and a unit is
	// denied until 100 ms in; the denial brings the TTL to one Period.
	m.Set(key, "1342177280") // 10·2^27
	m.SetTTL(key, 24*time.Hour)
	r, err = lim.Allow(ctx, "s", l)
	check("previous only, TTL of a day", r, err, false, 0, 100*time.Millisecond, time.Second)
	m.Advance(100 * time.Millisecond)
	r, err = lim.Allow(ctx, "s", l)
	check("100 ms later", r, err, true, 0, 0, 1900*time.Millisecond)
}

// TestSlidingWindowPeekLateWindow: a Peek of a state whose TTL is beyond
// its window writes nothing, so its counts stand until the TTL comes
// within the windows they count in: its ResetAfter is the time until the
// weighted count is zero, the whole TTL, not two Periods.
func TestSlidingWindowPeekLateWindow(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewSlidingWindow())
	l := limiter.PerSecond(10)
	key, _ := limiter.Key("t", "s", l)
	m.Set(key, "3")
	m.SetTTL(key, time.Hour)
	r, err := lim.Peek(context.Background(), "s", l)
	if err != nil || !r.Allowed || r.Remaining != 7 || r.ResetAfter != time.Hour {
		t.Fatalf("Peek = %+v, %v; want allowed, 7 left, reset in 1h (the key's TTL)", r, err)
	}
	if v, _ := m.Get(key); v != "3" || pttl(t, m, key) != time.Hour {
		t.Errorf("the Peek wrote: state %q, TTL %s", v, pttl(t, m, key))
	}
}

// TestSlidingWindowDeniedZeroState: a state of 0 found without a TTL (a
// key written elsewhere) is an idle limit: a denied writing call (a cost
// above the rate) deletes it rather than leave it for good.
func TestSlidingWindowDeniedZeroState(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewSlidingWindow())
	l := limiter.PerSecond(10)
	key, _ := limiter.Key("t", "z", l)
	m.Set(key, "0")
	r, err := lim.AllowN(context.Background(), "z", 11, l)
	if err != nil || r.Allowed || r.RetryAfter != -1 {
		t.Fatalf("AllowN(11) of 10/s = %+v, %v; want denied, never fits", r, err)
	}
	if m.Exists(key) {
		t.Errorf("the denial left %q (TTL %s); want it deleted", key, pttl(t, m, key))
	}
}
