package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestBucketedStalePeekResetPositive: a peek whose every TIME names a
// later window than the one it read (a round trip as long as a window)
// still reports a ResetAfter in (0, Period], never a negative one, which a
// caller would put in a header as a time in the past.
func TestBucketedStalePeekResetPositive(t *testing.T) {
	m, mst := newMini(t)
	st := &jumping{Store: mst, m: m, jump: 3300 * time.Millisecond}
	lim := newLim(t, st, strategy.NewBucketed())
	l := limiter.PerSecond(5)
	r, err := lim.Peek(context.Background(), "u", l)
	if err != nil || r.ResetAfter <= 0 || r.ResetAfter > l.Period || r.RetryAfter < 0 {
		t.Errorf("a peek stamped wrong on every attempt = %+v, %v; want ResetAfter in (0, 1s], RetryAfter >= 0", r, err)
	}
}
