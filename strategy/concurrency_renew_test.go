package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// Concurrency's godoc: "acquiring a lease ID that is already held renews
// it"; limiter.Leaser: "Extend renews a held lease for another TTL".
func TestConcurrencyRenewMovesExpiry(t *testing.T) {
	ctx := context.Background()
	f := limiter.InFlight{Max: 1, TTL: 10 * time.Second}
	for _, op := range []string{"Extend", "re-Acquire"} {
		t.Run(op, func(t *testing.T) {
			m, st := newMini(t)
			key, _ := limiter.InFlightKey("t", "u", f)
			req := limiter.LeaseRequest{Key: key, ID: "mine", Limit: f}
			lz := strategy.NewConcurrency()
			if s, err := lz.Acquire(ctx, st, req); err != nil || !s.Held {
				t.Fatalf("Acquire = %+v, %v", s, err)
			}
			m.Advance(8 * time.Second)
			var s limiter.LeaseState
			var err error
			if op == "Extend" {
				s, err = lz.Extend(ctx, st, req)
			} else {
				s, err = lz.Acquire(ctx, st, req)
			}
			if err != nil || !s.Held {
				t.Fatalf("%s at 8s = %+v, %v; want held", op, s, err)
			}
			m.Advance(5 * time.Second) // 13s: past the first TTL, within the renewed one (18s)
			other := req
			other.ID = "other"
			if s, err := lz.Acquire(ctx, st, other); err != nil || s.Held {
				t.Errorf("at 13s, after %s at 8s for 10s, another Acquire of Max 1 = %+v, %v; want refused (the renewed lease is held until 18s)", op, s, err)
			}
			if s, err := lz.Extend(ctx, st, req); err != nil || !s.Held {
				t.Errorf("at 13s, Extend of the lease renewed at 8s = %+v, %v; want held", s, err)
			}
		})
	}
}
