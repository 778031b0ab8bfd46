package strategy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestBucketedStaleDenialWaitsForTheCurrentWindow: a stale denial (the
// server's TIME named other windows on every attempt) waits until the
// server's current window ends, not a whole Period from now: the server's
// clock, 3.3 s further at each round trip, reads 200 ms into a window at
// the last attempt, so RetryAfter and ResetAfter are 800 ms.
func TestBucketedStaleDenialWaitsForTheCurrentWindow(t *testing.T) {
	m, mst := newMini(t)
	st := &jumping{Store: mst, m: m, jump: 3300 * time.Millisecond}
	lim := newLim(t, st, strategy.NewBucketed())
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
