package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestAlignedWindowRateLowered: README: "A limit's counter is named
// after its period, or after Named(...), so changing a rule's rate keeps
// the current window's count" (and conformance property 30: "a limit in use
// lowered ... is decided, never refused as corrupt"). AlignedWindow's
// counter holds 1 + what is left of the rate it was created with, so after
// a rules reload from 20/min to 10/min (same name and period) with 5 used:
// Peek fails with ErrCorruptCounter, each Allow fails with ErrCorruptCounter
// while its DECRBY still takes a unit, and then 7 more are admitted: 12 in
// the window under a limit of 10 (and 17 under FailOpen, which admits the
// 5 errors as Degraded). FixedWindow, Bucketed and Optimistic admit exactly
// 5 more.
func TestAlignedWindowRateLowered(t *testing.T) {
	m, st := newMini(t)
	m.Advance(250 * time.Millisecond)
	lim := newLim(t, st, strategy.NewAlignedWindow(strategy.WithAlignedClock(m.Now)))
	ctx := context.Background()
	hi := limiter.Per(20, time.Hour).Named("r")
	lo := limiter.Per(10, time.Hour).Named("r")
	if r, err := lim.AllowN(ctx, "u", 5, hi); err != nil || !r.Allowed || r.Remaining != 15 {
		t.Fatalf("AllowN(5) under 20/h = %+v, %v", r, err)
	}
	p, err := lim.Peek(ctx, "u", lo)
	if err != nil || !p.Allowed || p.Remaining != 5 {
		t.Errorf("Peek under 10/h with 5 used = %+v, %v; want allowed, Remaining 5", p, err)
	}
	admitted, errs := 0, 0
	for i := 0; i < 12; i++ {
		r, err := lim.Allow(ctx, "u", lo)
		if err != nil {
			errs++
			continue
		}
		if r.Allowed {
			admitted++
		}
	}
	if errs != 0 || admitted != 5 {
		t.Errorf("12 calls under 10/h with 5 used: %d admitted, %d errors; want 5 admitted (10 in the window), 0 errors", admitted, errs)
	}
}

// TestAlignedWindowRateRaised: the same reload the other way, 10/h
// to 20/h with 10 used: the count is 10 of 20, so the next call must be
// admitted with 9 remaining (as FixedWindow, Bucketed and Optimistic do);
// AlignedWindow denies it until the window ends.
func TestAlignedWindowRateRaised(t *testing.T) {
	m, st := newMini(t)
	m.Advance(250 * time.Millisecond)
	lim := newLim(t, st, strategy.NewAlignedWindow(strategy.WithAlignedClock(m.Now)))
	ctx := context.Background()
	lo := limiter.Per(10, time.Hour).Named("r")
	hi := limiter.Per(20, time.Hour).Named("r")
	if r, err := lim.AllowN(ctx, "u", 10, lo); err != nil || !r.Allowed {
		t.Fatalf("AllowN(10) under 10/h = %+v, %v", r, err)
	}
	r, err := lim.Allow(ctx, "u", hi)
	if err != nil || !r.Allowed || r.Remaining != 9 {
		t.Errorf("Allow under 20/h with 10 used = %+v, %v; want admitted, Remaining 9", r, err)
	}
}
