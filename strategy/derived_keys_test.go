package strategy_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/derive"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// keyLogged decorates Bucketed by embedding it, and reads Request.Keys in
// its own Decide, as a logging or metrics decorator would.
type keyLogged struct {
	*strategy.Bucketed
	seen []string
}

func (k *keyLogged) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	k.seen = append(k.seen, req.Keys...)
	return k.Bucketed.Decide(ctx, st, req)
}

// doubleCost decorates AlignedWindow by embedding it, and decides a
// Request of its own, built from the one it got.
type doubleCost struct{ *strategy.AlignedWindow }

func (d doubleCost) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	return d.AlignedWindow.Decide(ctx, st, limiter.Request{Keys: req.Keys, Limits: req.Limits, Cost: 2 * req.Cost, DryRun: req.DryRun})
}

// TestEmbeddingDecoratorsGetKeys: the Limiter leaves Request.Keys unbuilt
// for the epoch-aligned strategies, which name their keys with
// Request.AppendKey, but not for a type that embeds one of them (the
// method that tells the Limiter so is promoted to it): a decorator's
// Decide sees the keys, and one that builds its own Request from them
// works.
func TestEmbeddingDecoratorsGetKeys(t *testing.T) {
	ctx := context.Background()
	l := limiter.PerSecond(5)
	want, err := limiter.Key("t", "u", l)
	if err != nil {
		t.Fatal(err)
	}

	_, st := newMini(t)
	logged := &keyLogged{Bucketed: strategy.NewBucketed()}
	if _, err := newLim(t, st, logged).Allow(ctx, "u", l); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(logged.seen, []string{want}) {
		t.Errorf("a decorator of Bucketed saw Keys %q, want %q", logged.seen, []string{want})
	}

	_, st = newMini(t)
	lim := newLim(t, st, doubleCost{strategy.NewAlignedWindow()})
	var res limiter.Result
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v", p)
			}
		}()
		res, err = lim.Allow(ctx, "u", l)
	}()
	if err != nil {
		t.Fatalf("Allow through a decorator of AlignedWindow: %v", err)
	}
	if !res.Allowed || res.Remaining != 3 {
		t.Fatalf("Allow through a decorator of AlignedWindow that doubles the cost: %+v, want admitted with 3 remaining", res)
	}
}

// TestDerivesKeys: the Limiter builds no keys for AlignedWindow and
// Bucketed (they lay theirs out in one allocation each), and builds them
// for the decorators above and for every other strategy.
func TestDerivesKeys(t *testing.T) {
	for _, c := range []struct {
		name string
		s    limiter.Strategy
		want bool
	}{
		{"AlignedWindow", strategy.NewAlignedWindow(), true},
		{"Bucketed", strategy.NewBucketed(), true},
		{"a decorator of Bucketed", &keyLogged{Bucketed: strategy.NewBucketed()}, false},
		{"a decorator of AlignedWindow", doubleCost{strategy.NewAlignedWindow()}, false},
		{"FixedWindow", strategy.NewFixedWindow(), false},
		{"GCRA", strategy.NewGCRA(), false},
	} {
		if got := derive.Derives(c.s); got != c.want {
			t.Errorf("%s: the Limiter leaves its keys unbuilt: %v, want %v", c.name, got, c.want)
		}
	}
}
