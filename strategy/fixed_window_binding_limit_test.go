package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestFixedWindowDenialBindsTheLimitThatDenied: of two limits, the one
// whose count exceeds its rate denies; the other, which the cost would
// fill exactly, neither denies nor sets RetryAfter.
func TestFixedWindowDenialBindsTheLimitThatDenied(t *testing.T) {
	_, st := newMini(t)
	lim := newLim(t, st, strategy.NewFixedWindow())
	ctx := context.Background()
	sec, min := limiter.PerSecond(2), limiter.PerMinute(3)
	for i := range 2 {
		if r, err := lim.Allow(ctx, "d", sec, min); err != nil || !r.Allowed {
			t.Fatalf("call %d: %+v, %v; want admitted", i, r, err)
		}
	}
	r, err := lim.Allow(ctx, "d", sec, min)
	if err != nil || r.Allowed || r.Index != 0 || r.RetryAfter != time.Second {
		t.Fatalf("3rd call: %+v, %v; want denied by the 2/s limit (index 0), retry after 1s", r, err)
	}
	// the minute's count was taken back: one more unit fits it
	if r, err := lim.Peek(ctx, "d", min); err != nil || r.Remaining != 1 {
		t.Fatalf("peek of the minute: %+v, %v; want 1 remaining", r, err)
	}
}
