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

// TestSlidingWindowStartAhead: a state whose window start is ahead of
// the server's clock (written by a primary whose clock ran ahead of the
// replica promoted in its place, or by hand) is neither refused nor brought
// back to the clock, as GCRA clamps a TAT: an admission stores it with a
// TTL of start+2P-now, more than the documented two Periods, and the
// window (and the subject's denial) lasts as long as the start is ahead.
func TestSlidingWindowStartAhead(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewSlidingWindow())
	ctx := context.Background()
	l := limiter.PerSecond(10)
	key, _ := limiter.Key("t", "s", l)
	now := m.Now().UnixMilli()

	// 1. A start 5 s ahead (a failover to a replica 5 s behind), 3 used,
	// with the 2 s TTL the old primary gave it.
	m.Set(key, fmt.Sprintf("%d:3:0", now+5000))
	m.SetTTL(key, 2*time.Second)
	r, err := lim.Allow(ctx, "s", l)
	if err != nil {
		t.Fatal(err)
	}
	ttl := m.TTL(key)
	t.Logf("start 5s ahead: Allow = allowed %v remaining %d reset %s; key TTL now %s (was 2s)", r.Allowed, r.Remaining, r.ResetAfter, ttl)
	if ttl > 2*time.Second || r.ResetAfter > 2*time.Second {
		t.Errorf("key TTL %s, ResetAfter %s: want at most 2 Periods (2s)", ttl, r.ResetAfter)
	}

	// 2. A start one day ahead (a value no clock of this server wrote):
	// not refused as corrupt, and after 10 admissions the subject is
	// denied for a day, its key living a day and 2 s.
	m.Del(key)
	m.Set(key, fmt.Sprintf("%d:0:0", now+86_400_000))
	r, err = lim.AllowN(ctx, "s", 10, l)
	if errors.Is(err, limiter.ErrCorruptCounter) {
		return // refused: fine
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("start 1 day ahead: AllowN(10) = allowed %v, key TTL %s", r.Allowed, m.TTL(key))
	m.Advance(2 * time.Second) // two Periods: the weighted count must be 0
	r, err = lim.Allow(ctx, "s", l)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("2 s later: Allow = allowed %v retry %s; key TTL %s", r.Allowed, r.RetryAfter, m.TTL(key))
	if !r.Allowed || m.TTL(key) > 2*time.Second {
		t.Errorf("2 Periods after the last admission: allowed %v, RetryAfter %s, TTL %s; want admitted, TTL <= 2s (or ErrCorruptCounter)", r.Allowed, r.RetryAfter, m.TTL(key))
	}
}
