package limiter_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/storetest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// twoScripts is a ManyScriptStrategy (author.go: "whose scripts each have
// a companion") with two scripts: FixedWindow's, under two SHAs, one for a
// cost of 1 and one for other costs, each with its many-request companion.
type twoScripts struct {
	fw           strategy.FixedWindow
	x, y, xm, ym *store.Script
}

func (s twoScripts) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	return s.fw.Decide(ctx, st, req)
}

func (s twoScripts) BatchScript(req limiter.Request) (*store.Script, []any, error) {
	_, args, err := s.fw.BatchScript(req)
	if req.Cost == 1 {
		return s.x, args, err
	}
	return s.y, args, err
}

func (s twoScripts) BatchResult(req limiter.Request, r store.Reply) (limiter.Result, error) {
	return s.fw.BatchResult(req, r)
}

func (s twoScripts) ManyScript(sc *store.Script) *store.Script {
	switch sc {
	case s.x:
		return s.xm
	case s.y:
		return s.ym
	}
	return nil
}

// TestAllowManySubjectOrderTwoScripts: "Asks of one subject are decided in
// their order, as the same calls one after another" (AllowMany's doc), for
// a strategy of two scripts too, with a many-request companion each or one
// without. Subject u, 3 per minute, asks of cost 1, 2, 1: in order, 1 (2
// left), 2 (0 left), then the third is denied. Asks of the two scripts on
// keys of their own still go in one batch.
func TestAllowManySubjectOrderTwoScripts(t *testing.T) {
	// FixedWindow's script and its many-request companion, each also
	// under a second SHA
	fw := strategy.NewFixedWindow()
	x := strategy.FixedWindowScript()
	xm := fw.ManyScript(x)
	both := twoScripts{
		x: x, y: store.NewScript(x.Source() + "\n-- y\n"),
		xm: xm, ym: store.NewScript(xm.Source() + "\n-- y\n"),
	}
	oneMany := both
	oneMany.ym = nil
	l := limiter.PerMinute(3)
	for name, s := range map[string]twoScripts{"companions": both, "one without": oneMany} {
		for _, one := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/one-server=%v", name, one), func(t *testing.T) {
				_, st := newMiniFastFail(t)
				bc := &storetest.Batches{Store: st, One: one}
				lim, err := limiter.New(bc, s)
				if err != nil {
					t.Fatal(err)
				}
				asks := []limiter.Ask{
					{Key: "u", Cost: 1, Limits: []limiter.Limit{l}},
					{Key: "u", Cost: 2, Limits: []limiter.Limit{l}},
					{Key: "u", Cost: 1, Limits: []limiter.Limit{l}},
				}
				want := []bool{true, true, false}
				for i, a := range lim.AllowMany(context.Background(), asks) {
					if a.Err != nil || a.Result.Allowed != want[i] {
						t.Errorf("ask %d (cost %d): allowed %v remaining %d err %v; want allowed %v", i, asks[i].Cost, a.Result.Allowed, a.Result.Remaining, a.Err, want[i])
					}
				}
				// the scripts are cached now: asks of both on keys of their
				// own are one batch
				bc.Zero()
				apart := []limiter.Ask{
					{Key: "a", Cost: 1, Limits: []limiter.Limit{l}},
					{Key: "b", Cost: 2, Limits: []limiter.Limit{l}},
					{Key: "c", Cost: 1, Limits: []limiter.Limit{l}},
				}
				for i, a := range lim.AllowMany(context.Background(), apart) {
					if a.Err != nil || !a.Result.Allowed || a.Result.Remaining != 3-apart[i].Cost {
						t.Errorf("ask %d of its own subject: %+v, %v; want admitted", i, a.Result, a.Err)
					}
				}
				if n := bc.BatchCount(); n != 1 {
					t.Errorf("%d batches for asks of their own subjects, want 1", n)
				}
			})
		}
	}
}
