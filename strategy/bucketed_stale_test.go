package strategy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/strategy"
)

// TestBucketedStaleDenialWaitsForTheCurrentWindow: a stale denial (the
// server's TIME named other windows on every attempt) waits until the
// server's current window ends, not a whole Period from now: the server's
// clock, 3.3 s further at each round trip, reads 200 ms into a window at
// the last attempt, so RetryAfter and ResetAfter are 800 ms.
func TestBucketedStaleDenialWaitsForTheCurrentWindow(t *testing.T) {
	m, st, lim := staleBucketed(t)
	l := limiter.PerSecond(5)
	r, err := lim.Allow(context.Background(), "u", l)
	if err != nil || r.Allowed || !errors.Is(r.Cause, strategy.ErrStaleWindow) {
		t.Fatalf("a decision stamped wrong on every attempt = %+v, %v; want a stale denial", r, err)
	}
	// the last attempt's TIME: one jump before the take-back's round trip
	at := m.Now().Add(-st.jump)
	want := l.Period - time.Duration(at.UnixMilli()%l.Period.Milliseconds())*time.Millisecond
	if want == l.Period {
		t.Fatalf("the last TIME %s is at a window's start; the test needs it inside one", at)
	}
	if r.RetryAfter != want || r.ResetAfter != want {
		t.Errorf("stale denial at %s = %+v; want RetryAfter and ResetAfter %s, the rest of the server's current window", at, r, want)
	}
}

// TestBucketedStalePeekResetPositive: a peek whose every TIME names a
// later window than the one it read (a round trip as long as a window)
// still reports a ResetAfter in (0, Period], never a negative one, which a
// caller would put in a header as a time in the past.
func TestBucketedStalePeekResetPositive(t *testing.T) {
	_, _, lim := staleBucketed(t)
	l := limiter.PerSecond(5)
	r, err := lim.Peek(context.Background(), "u", l)
	if err != nil || r.ResetAfter <= 0 || r.ResetAfter > l.Period || r.RetryAfter < 0 {
		t.Errorf("a peek stamped wrong on every attempt = %+v, %v; want ResetAfter in (0, 1s], RetryAfter >= 0", r, err)
	}
}

// staleBucketed is Bucketed on a miniredis whose clock moves 3.3 s at
// every round trip: every TIME names another window.
func staleBucketed(t *testing.T) (*redistest.Mini, *jumping, *limiter.Limiter) {
	m, mst := newMini(t)
	st := &jumping{Store: mst, m: m, jump: 3300 * time.Millisecond}
	return m, st, newLim(t, st, strategy.NewBucketed())
}
