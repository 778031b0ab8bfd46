package strategy_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/storetest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// doubled is a decorator of GCRA whose own Decide counts every request
// twice: its BatchScript, promoted from GCRA, does not.
type doubled struct {
	strategy.GCRA
	calls atomic.Int64
}

func (d *doubled) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	d.calls.Add(1)
	req.Cost *= 2
	return d.GCRA.Decide(ctx, st, req)
}

// TestAllowManyDecoratedScriptStrategy: AllowMany on a type that embeds a
// scripted strategy and decides with a Decide of its own calls that Decide
// for each ask, as Allow does: 3 asks of a cost doubled to 2 under a burst
// of 4 admit 2 (it batched the embedded GCRA's script: 3 admitted, and the
// decorator never called).
func TestAllowManyDecoratedScriptStrategy(t *testing.T) {
	_, st := newMini(t)
	d := &doubled{}
	lim := newLim(t, &storetest.Batches{Store: st, One: true}, d)
	asks := make([]limiter.Ask, 3)
	for i := range asks {
		asks[i] = limiter.Ask{Key: "d", Limits: []limiter.Limit{limiter.PerHour(4)}}
	}
	admitted := 0
	for i, a := range lim.AllowMany(context.Background(), asks) {
		if a.Err != nil {
			t.Fatalf("ask %d: %v", i, a.Err)
		}
		if a.Result.Allowed {
			admitted++
		}
	}
	if n := d.calls.Load(); n != int64(len(asks)) || admitted != 2 {
		t.Errorf("the decorator's Decide called %d times, %d admitted; want %d calls, 2 admitted", n, admitted, len(asks))
	}
	// the strategy itself still batches: one batch (once its script is
	// loaded)
	b := &storetest.Batches{Store: st, One: true}
	plain := newLim(t, b, strategy.NewGCRA())
	plain.AllowMany(context.Background(), asks)
	b.Zero()
	plain.AllowMany(context.Background(), asks)
	if n := b.BatchCount(); n != 1 {
		t.Errorf("GCRA's own AllowMany of 3 asks sent %d batches; want 1", n)
	}
}
