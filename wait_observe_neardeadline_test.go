package limiter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// failing fails every call at once, as a backend that answers an error.
type failing struct{}

func (failing) Decide(context.Context, store.Store, limiter.Request) (limiter.Result, error) {
	return limiter.Result{}, errors.New("ERR backend failing")
}

// alwaysNearDeadline is a context whose deadline is always a millisecond
// away and never passes: Wait, after a FailClosed denial, finds too little
// time left to try again (under 2 ms) on its first try, whatever the
// machine's speed.
type alwaysNearDeadline struct{ context.Context }

func (alwaysNearDeadline) Deadline() (time.Time, bool) { return time.Now().Add(time.Millisecond), true }

// TestWaitNearDeadlineToldAsReturned: a Wait ended because a FailClosed
// try left too little time before the deadline returns a deadline error
// wrapping the try's cause, and its observer is told that error for the
// try (OnCall's err, OnError), as Wait returns it: it was told nil.
func TestWaitNearDeadlineToldAsReturned(t *testing.T) {
	_, st := newMini(t)
	c := &calls{}
	lim, err := limiter.New(st, failing{}, limiter.WithFailMode(limiter.FailClosed), limiter.WithObserver(c))
	if err != nil {
		t.Fatal(err)
	}
	res, werr := lim.Wait(alwaysNearDeadline{context.Background()}, "w", limiter.PerMinute(10))
	if !errors.Is(werr, context.DeadlineExceeded) || !res.Degraded {
		t.Fatalf("Wait = %+v, %v; want the Degraded denial and DeadlineExceeded", res, werr)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) != 1 || !errors.Is(c.seen[0], context.DeadlineExceeded) || limiter.ErrorKind(c.seen[0]) != "timeout" {
		t.Errorf("OnCall told %v; want the one try with the error Wait returned (%v, kind timeout)", c.seen, werr)
	}
	c.tally.mu.Lock()
	defer c.tally.mu.Unlock()
	told := false
	for _, e := range c.tally.errs {
		told = told || errors.Is(e, context.DeadlineExceeded)
	}
	if !told {
		t.Errorf("OnError told %v; want the wait's end among them", c.tally.errs)
	}
}
