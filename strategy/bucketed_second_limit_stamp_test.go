package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
)

// Bucketed doc: "a decision is counted only in the windows that the TIME
// of its own transaction names" and "the transaction's TIME also verifies
// the index, and a decision stamped with the wrong bucket ... is undone and
// redone on the right one".
func TestSecondLimitStampVerified(t *testing.T) {
	m, st := newMini(t)
	m.Advance(1234 * time.Millisecond)
	lim, skew := skewedBucketed(t, m, st)
	hour := limiter.Limit{Rate: 100, Period: time.Hour, Name: "h"}
	sec := limiter.Limit{Rate: 100, Period: time.Second, Name: "s"}
	ctx := context.Background()
	if r, err := lim.Allow(ctx, "u", hour, sec); err != nil || !r.Allowed {
		t.Fatalf("first call = %+v, %v", r, err)
	}
	// the app clock one second ahead: the hour's window is the same, the
	// second's is the next one on the app clock
	skew.Store(int64(time.Second))
	if r, err := lim.Allow(ctx, "u", hour, sec); err != nil || !r.Allowed {
		t.Fatalf("second call = %+v, %v", r, err)
	}
	cur := bucketKey(t, "u", sec, m.Now())
	next := bucketKey(t, "u", sec, m.Now().Add(time.Second))
	v, _ := m.Get(cur)
	w, _ := m.Get(next)
	if v != "2" || (w != "" && w != "0") {
		t.Errorf("the second limit's server window %q holds %q, the next window %q holds %q; want 2 and nothing (counted only in the windows the server's TIME names)", cur, v, next, w)
	}
}
