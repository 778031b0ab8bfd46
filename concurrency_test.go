package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// abandoningLeaser fails every Acquire with a lost reply
// (store.ErrUnknownOutcome) and, a limiter.LeaseAbandoner, records what
// it is asked to release or abandon.
type abandoningLeaser struct {
	mu    sync.Mutex
	calls []string
}

func (l *abandoningLeaser) Acquire(context.Context, store.Store, limiter.LeaseRequest) (limiter.LeaseState, error) {
	return limiter.LeaseState{}, fmt.Errorf("reply lost: %w", store.ErrUnknownOutcome)
}

func (l *abandoningLeaser) Extend(context.Context, store.Store, limiter.LeaseRequest) (limiter.LeaseState, error) {
	return limiter.LeaseState{}, nil
}

func (l *abandoningLeaser) note(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, s)
}

func (l *abandoningLeaser) noted() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprint(l.calls)
}

func (l *abandoningLeaser) Release(context.Context, store.Store, limiter.LeaseRequest) error {
	l.note("Release")
	return nil
}

func (l *abandoningLeaser) Abandon(context.Context, store.Store, limiter.LeaseRequest) error {
	l.note("Abandon")
	return nil
}

// TestAcquireLostReplyAbandons: after an Acquire whose outcome is unknown,
// a Leaser that is a limiter.LeaseAbandoner is asked to Abandon the lease,
// in place of Release, before Acquire returns: once, or, when that Abandon
// fails, once more (it is idempotent), so that a connection broken by the
// lost reply does not leave the slot taken for the lease's TTL.
func TestAcquireLostReplyAbandons(t *testing.T) {
	for _, tc := range []struct {
		leaser interface {
			limiter.LeaseAbandoner
			limiter.Leaser
			noted() string
		}
		want string
	}{
		{&abandoningLeaser{}, "[Abandon]"},
		{&flakyAbandoner{}, "[Abandon Abandon]"},
	} {
		_, st := newMini(t)
		c, err := limiter.NewConcurrency(st, tc.leaser)
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.Acquire(context.Background(), "u", limiter.InFlight{Max: 1, TTL: time.Second})
		if calls := tc.leaser.noted(); err == nil || l.Held || calls != tc.want {
			t.Errorf("%T: Acquire after a lost reply = %+v, %v, leaser calls %v; want an error and %s", tc.leaser, l, err, calls, tc.want)
		}
	}
}

// flakyAbandoner is abandoningLeaser whose first Abandon fails, as a call
// made on a connection the client is still tearing down after a lost
// reply fails without being sent.
type flakyAbandoner struct {
	abandoningLeaser
	failed bool
}

func (l *flakyAbandoner) Abandon(ctx context.Context, st store.Store, req limiter.LeaseRequest) error {
	_ = l.abandoningLeaser.Abandon(ctx, st, req)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.failed {
		l.failed = true
		return errors.New("somestore: connection closed (not sent)")
	}
	return nil
}
