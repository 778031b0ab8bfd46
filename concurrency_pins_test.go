package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// TestExtendOfAReleasedLease: Extend of a lease released already
// reports false although other leases of the set are held.
func TestExtendOfAReleasedLease(t *testing.T) {
	_, st := newMini(t)
	c, err := limiter.NewConcurrency(st, strategy.NewConcurrency())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f := limiter.InFlight{Max: 2, TTL: time.Minute}
	a, err := c.Acquire(ctx, "u", f)
	if err != nil || !a.Held {
		t.Fatalf("Acquire a = %+v, %v", a, err)
	}
	b, err := c.Acquire(ctx, "u", f)
	if err != nil || !b.Held {
		t.Fatalf("Acquire b = %+v, %v", b, err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.Extend(ctx); err != nil || ok {
		t.Errorf("Extend of a released lease = %v, %v; want false, nil", ok, err)
	}
	if ok, err := b.Extend(ctx); err != nil || !ok {
		t.Errorf("Extend of a held lease = %v, %v; want true, nil", ok, err)
	}
}

// TestInFlightMaxBound: Max = MaxInFlight is valid, one more is not.
func TestInFlightMaxBound(t *testing.T) {
	if _, err := limiter.InFlightKey("p", "u", limiter.InFlight{Max: limiter.MaxInFlight, TTL: time.Second}); err != nil {
		t.Errorf("Max = MaxInFlight: %v", err)
	}
	if _, err := limiter.InFlightKey("p", "u", limiter.InFlight{Max: limiter.MaxInFlight + 1, TTL: time.Second}); err == nil {
		t.Error("Max = MaxInFlight+1 accepted")
	}
}

// ctxLeaser fails every Acquire with err and records whether the release
// that follows had a live context.
type ctxLeaser struct {
	err      error
	released []error
}

func (l *ctxLeaser) Acquire(context.Context, store.Store, limiter.LeaseRequest) (limiter.LeaseState, error) {
	return limiter.LeaseState{}, l.err
}

func (l *ctxLeaser) Extend(context.Context, store.Store, limiter.LeaseRequest) (limiter.LeaseState, error) {
	return limiter.LeaseState{}, nil
}

func (l *ctxLeaser) Release(ctx context.Context, _ store.Store, _ limiter.LeaseRequest) error {
	l.released = append(l.released, ctx.Err())
	return ctx.Err()
}

// TestReleaseAfterLostReplyHasTime: with no timeout set (the default),
// the release after a lost reply runs on a live context (a second), not
// on one that has ended already.
func TestReleaseAfterLostReplyHasTime(t *testing.T) {
	_, st := newMini(t)
	leaser := &ctxLeaser{err: fmt.Errorf("reply lost: %w", store.ErrUnknownOutcome)}
	c, err := limiter.NewConcurrency(st, leaser)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(context.Background(), "u", limiter.InFlight{Max: 1, TTL: time.Minute}); err == nil {
		t.Fatal("Acquire after a lost reply: no error")
	}
	if len(leaser.released) != 1 || leaser.released[0] != nil {
		t.Errorf("releases after the lost reply: %v; want one on a live context", leaser.released)
	}
}

// TestLeaserInvalidLimitNotFailedOpen: a Leaser's ErrInvalidLimit is
// bad input, an error in every fail mode, never a Degraded lease.
func TestLeaserInvalidLimitNotFailedOpen(t *testing.T) {
	_, st := newMini(t)
	leaser := &ctxLeaser{err: fmt.Errorf("leaser: %w", limiter.ErrInvalidLimit)}
	c, err := limiter.NewConcurrency(st, leaser, limiter.WithFailMode(limiter.FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Acquire(context.Background(), "u", limiter.InFlight{Max: 1, TTL: time.Minute})
	if !errors.Is(err, limiter.ErrInvalidLimit) || l.Held {
		t.Errorf("Acquire = %+v, %v; want ErrInvalidLimit and no lease", l, err)
	}
}
