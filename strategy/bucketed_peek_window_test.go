package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
)

// Bucketed doc: windows by the server's clock; "the transaction's TIME
// also verifies the index". A Peek with the app clock a window ahead must
// read the server's window.
func TestPeekOnServersWindow(t *testing.T) {
	m, st := newMini(t)
	m.Advance(1234 * time.Millisecond)
	lim, skew := skewedBucketed(t, m, st)
	l := limiter.PerMinute(5)
	ctx := context.Background()
	for range 5 {
		if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed {
			t.Fatalf("Allow = %+v, %v", r, err)
		}
	}
	skew.Store(int64(time.Minute))
	if r, err := lim.Peek(ctx, "u", l); err != nil || r.Allowed || r.Remaining != 0 {
		t.Errorf("Peek of a full window, app clock a Period ahead = %+v, %v; want denied, 0 remaining", r, err)
	}
}
