package limiter_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestWaitNeverAdmittedOnCallSeesTheError: a CallObserver is told the
// error Wait returns ("r and err are what the call returns"), for a
// denial no wait can help as for any other.
func TestWaitNeverAdmittedOnCallSeesTheError(t *testing.T) {
	_, st := newMini(t)
	c := &calls{}
	lim := newLimiter(t, st, limiter.WithObserver(c))
	_, err := lim.WaitN(stopAfter(t, 10*time.Second), "w", 5, limiter.PerSecond(3))
	if !errors.Is(err, limiter.ErrNeverAdmitted) {
		t.Fatalf("WaitN = %v, want ErrNeverAdmitted", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) != 1 || !errors.Is(c.seen[0], limiter.ErrNeverAdmitted) {
		t.Errorf("OnCall told %v; want the one try with ErrNeverAdmitted", c.seen)
	}
}

// TestAllowManyObserverGetsTheCallersLiveContext: the observer is told
// each answer "with the caller's context", not the batch's timeout
// context, which AllowMany has canceled by then.
func TestAllowManyObserverGetsTheCallersLiveContext(t *testing.T) {
	_, st := newMini(t)
	var mu sync.Mutex
	var errs []error
	obs := limiter.ObserverFuncs{Decision: func(ctx context.Context, _ string, _ limiter.Result) {
		mu.Lock()
		errs = append(errs, ctx.Err())
		mu.Unlock()
	}}
	lim, err := limiter.New(st, strategy.NewBucketed(), limiter.WithTimeout(time.Second), limiter.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	l := []limiter.Limit{limiter.PerMinute(5)}
	lim.AllowMany(context.Background(), []limiter.Ask{{Key: "a", Limits: l}, {Key: "b", Limits: l}})
	mu.Lock()
	defer mu.Unlock()
	if len(errs) != 2 {
		t.Fatalf("observer told %d decisions, want 2", len(errs))
	}
	for i, e := range errs {
		if e != nil {
			t.Errorf("decision %d told with a context that ended (%v); the caller's is live", i, e)
		}
	}
}
