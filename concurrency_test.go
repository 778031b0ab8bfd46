package limiter_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// canceledLeaser fails every Acquire with a bare context.Canceled (no
// store.ErrUnknownOutcome), as a store of another author may, after it
// may have sent the call; it counts what is released or abandoned.
type canceledLeaser struct{ freed int }

func (l *canceledLeaser) Acquire(context.Context, store.Store, limiter.LeaseRequest) (limiter.LeaseState, error) {
	return limiter.LeaseState{}, fmt.Errorf("somestore: %w", context.Canceled)
}

func (l *canceledLeaser) Extend(context.Context, store.Store, limiter.LeaseRequest) (limiter.LeaseState, error) {
	return limiter.LeaseState{}, nil
}

func (l *canceledLeaser) Release(context.Context, store.Store, limiter.LeaseRequest) error {
	l.freed++
	return nil
}

// TestAcquireCanceledFreesSlot: an Acquire that failed on its context's
// cancellation may have taken a slot under an ID no caller holds: it is
// released, as after a lost reply or a deadline (it stayed taken until its
// TTL when the store did not say the outcome was unknown).
func TestAcquireCanceledFreesSlot(t *testing.T) {
	_, st := newMini(t)
	leaser := &canceledLeaser{}
	c, err := limiter.NewConcurrency(st, leaser)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := c.Acquire(context.Background(), "u", limiter.InFlight{Max: 1, TTL: time.Minute}); err == nil || l.Held {
		t.Fatalf("Acquire = %+v, %v; want an error", l, err)
	}
	if leaser.freed != 1 {
		t.Errorf("%d releases after the canceled Acquire; want 1", leaser.freed)
	}
}
