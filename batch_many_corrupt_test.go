package limiter_test

import (
	"context"
	"errors"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/storetest"
	"github.com/quotagate/limiter/strategy"
)

// TestAllowManyOneServerCorruptAlone: AllowMany's doc: "an ask that fails
// there (a corrupt counter) gets its own error while the others are
// decided" (one call of the many-request script). The corrupt counter is
// a hash, which fixed_window.lua's INCR refuses (a raised Redis error).
func TestAllowManyOneServerCorruptAlone(t *testing.T) {
	for _, s := range []limiter.Strategy{strategy.NewFixedWindow(), strategy.NewGCRA(), strategy.NewTokenBucket()} {
		m, st := newMiniFastFail(t)
		bc := &storetest.Batches{Store: st, One: true}
		lim, err := limiter.New(bc, s)
		if err != nil {
			t.Fatal(err)
		}
		l := limiter.PerMinute(3)
		ctx := context.Background()
		if r, err := lim.Allow(ctx, "bad", l); err != nil || !r.Allowed {
			t.Fatalf("%T: %+v %v", s, r, err)
		}
		for _, k := range m.Keys() {
			m.Del(k)
			m.HSet(k, "f", "v")
		}
		before := bc.CmdCount()
		asks := []limiter.Ask{{Key: "a", Limits: []limiter.Limit{l}}, {Key: "bad", Limits: []limiter.Limit{l}}, {Key: "b", Limits: []limiter.Limit{l}}}
		ans := lim.AllowMany(ctx, asks)
		if !errors.Is(ans[1].Err, limiter.ErrCorruptCounter) {
			t.Errorf("%T: the corrupt ask: %+v, %v; want ErrCorruptCounter", s, ans[1].Result, ans[1].Err)
		}
		for _, i := range []int{0, 2} {
			if ans[i].Err != nil || !ans[i].Result.Allowed || ans[i].Result.Remaining != 2 {
				t.Errorf("%T: ask %d: %+v, %v; want admitted, 2 remaining", s, i, ans[i].Result, ans[i].Err)
			}
		}
		if n := bc.CmdCount() - before; n > 2 { // one many call (and its EVAL after NOSCRIPT)
			t.Errorf("%T: %d commands; want one many-request call", s, n)
		}
	}
}
