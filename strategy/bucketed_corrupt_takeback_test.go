package strategy_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// cancelAfterFirstMulti cancels the armed context once the first
// MULTI ... EXEC round trip it sees has returned.
type cancelAfterFirstMulti struct {
	store.Store
	cancel atomic.Pointer[context.CancelFunc]
}

func (c *cancelAfterFirstMulti) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	rs, err := c.Store.Do(ctx, cmds...)
	if len(cmds) > 0 && cmds[0].Name == "MULTI" {
		if f := c.cancel.Swap(nil); f != nil {
			(*f)()
		}
	}
	return rs, err
}

// Bucketed doc: a corrupt counter is limiter.ErrCorruptCounter; "the
// increments of the other limits are taken back (on the detached context)
// before the call returns, so no counter is left moved unless Redis is
// lost just then".
func TestCorruptTakeBackDetached(t *testing.T) {
	m, st := newMini(t)
	cs := &cancelAfterFirstMulti{Store: st}
	lim := newLim(t, cs, strategy.NewBucketed())
	a := limiter.Limit{Rate: 10, Period: time.Hour, Name: "a"}
	b := limiter.Limit{Rate: 10, Period: time.Hour, Name: "b"}
	bg := context.Background()
	if r, err := lim.Allow(bg, "u", a, b); err != nil || !r.Allowed { // syncs the clock
		t.Fatalf("first call = %+v, %v", r, err)
	}
	kb := bucketKey(t, "u", b, m.Now())
	if err := m.Set(kb, "hash?"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	cs.cancel.Store(&cancel)
	_, err := lim.Allow(ctx, "u", a, b)
	if !errors.Is(err, limiter.ErrCorruptCounter) {
		t.Errorf("call on a corrupt counter: %v; want ErrCorruptCounter", err)
	}
	r, err := lim.Peek(bg, "u", a)
	if err != nil || r.Remaining != 9 {
		t.Errorf("limit a after 1 admission and 1 corrupt call whose context ended between round trips = %+v, %v; want 9 remaining (its increment taken back)", r, err)
	}
}
