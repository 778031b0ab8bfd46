package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestSlidingLogPeekResetAfterShortenedPeriod: after a named limit's
// period is shortened (1h to 2s, 10 used), Peek and AllowN(0), which repair
// nothing, report ResetAfter from the log's newest unit and the new period
// (2s), as the next AllowN does; they reported the old log's PTTL (1h).
func TestSlidingLogPeekResetAfterShortenedPeriod(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewSlidingLog())
	ctx := context.Background()
	long := limiter.Per(10, time.Hour).Named("q")
	short := limiter.Per(10, 2*time.Second).Named("q")
	if r, err := lim.AllowN(ctx, "u", 10, long); err != nil || !r.Allowed {
		t.Fatalf("AllowN(10) = %+v, %v", r, err)
	}
	p, err := lim.Peek(ctx, "u", short)
	if err != nil {
		t.Fatal(err)
	}
	z, err := lim.AllowN(ctx, "u", 0, short)
	if err != nil {
		t.Fatal(err)
	}
	a, err := lim.Allow(ctx, "u", short)
	if err != nil {
		t.Fatal(err)
	}
	if a.Allowed || a.ResetAfter != 2*time.Second || a.RetryAfter != 2*time.Second {
		t.Fatalf("Allow under the short rule = %+v; want denied, RetryAfter 2s, ResetAfter 2s", a)
	}
	if p.ResetAfter != 2*time.Second {
		t.Errorf("Peek ResetAfter = %s, want 2s (what the next Allow reports: %s)", p.ResetAfter, a.ResetAfter)
	}
	if z.ResetAfter != 2*time.Second {
		t.Errorf("AllowN(0) ResetAfter = %s, want 2s", z.ResetAfter)
	}
	_ = m
}
