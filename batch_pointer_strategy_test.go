package limiter_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/storetest"
	"github.com/quotagate/limiter/strategy"
)

// TestAllowManyPointerStrategy: a strategy given as a pointer (&FixedWindow)
// is still the module's own, not a type that embeds one: its 16 asks go in
// one batch of one call, as with the value.
func TestAllowManyPointerStrategy(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    limiter.Strategy
	}{
		{"*FixedWindow", func() limiter.Strategy { s := strategy.NewFixedWindow(); return &s }()},
		{"*GCRA", func() limiter.Strategy { s := strategy.NewGCRA(); return &s }()},
		{"*TokenBucket", func() limiter.Strategy { s := strategy.NewTokenBucket(); return &s }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, st := newMiniFastFail(t)
			bc := &storetest.Batches{Store: st, One: true}
			lim, err := limiter.New(bc, tc.s)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			asks := make([]limiter.Ask, 16)
			for round := range 2 { // the first loads the scripts
				bc.Zero()
				for i := range asks {
					asks[i] = limiter.Ask{Key: fmt.Sprintf("p%d-%d", round, i), Limits: []limiter.Limit{limiter.PerHour(10)}}
				}
				for i, a := range lim.AllowMany(ctx, asks) {
					if a.Err != nil || !a.Result.Allowed {
						t.Fatalf("ask %d: %+v", i, a)
					}
				}
			}
			if bc.BatchCount() != 1 || bc.CmdCount() != 1 {
				t.Errorf("16 asks sent %d batches of %d commands in all; want 1 of 1", bc.BatchCount(), bc.CmdCount())
			}
		})
	}
}
