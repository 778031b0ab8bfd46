package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestOptimisticZeroCounterKeepsWindow: a counter at 0 (a quota lease given
// back whole leaves one) is a live window: an admission counts on it with
// INCRBY, keeping its expiry, and never restarts the window with SET ... PX.
func TestOptimisticZeroCounterKeepsWindow(t *testing.T) {
	ctx := context.Background()
	l := limiter.PerSecond(1)
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewOptimistic())
	key, _ := limiter.Key("t", "x", l)
	if err := m.Set(key, "0"); err != nil {
		t.Fatal(err)
	}
	m.SetTTL(key, time.Second)
	m.Advance(900 * time.Millisecond)
	r, err := lim.Allow(ctx, "x", l)
	if err != nil || !r.Allowed || r.ResetAfter != 100*time.Millisecond {
		t.Fatalf("on a counter at 0 with 100ms left = %+v, %v; want admitted, reset in 100ms", r, err)
	}
	if ttl := m.TTL(key); ttl <= 0 || ttl > 100*time.Millisecond {
		t.Errorf("the counter's TTL after the admission = %s; want the window's 100ms left, not a new Period", ttl)
	}
	m.Advance(200 * time.Millisecond) // the window is over
	if r, err := lim.Allow(ctx, "x", l); err != nil || !r.Allowed {
		t.Errorf("in the next window = %+v, %v; want admitted", r, err)
	}
}
