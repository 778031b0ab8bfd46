package limiter_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// hungSignal accepts commands and never answers; started is closed at the
// first one.
type hungSignal struct {
	store.Store
	once    sync.Once
	started chan struct{}
}

func (h *hungSignal) hang(ctx context.Context) error {
	h.once.Do(func() { close(h.started) })
	<-ctx.Done()
	return ctx.Err()
}

func (h *hungSignal) EvalSha(ctx context.Context, _ string, _ []string, _ []any) (any, error) {
	return nil, h.hang(ctx)
}

func (h *hungSignal) Eval(ctx context.Context, _ string, _ []string, _ []any) (any, error) {
	return nil, h.hang(ctx)
}

func (h *hungSignal) Do(ctx context.Context, _ ...store.Cmd) ([]store.Reply, error) {
	return nil, h.hang(ctx)
}

// TestLeaseWaiterKeepsItsFailMode: lim.With(WithFailMode(...))
// (the README's per-caller variation; rules does it for a rule set's
// fail_mode) shares the quota lease table. When Redis does not answer, a
// caller of the FailClosed Limiter that waits for the lease being taken by
// the FailOpen copy is handed the copy's outcome: a (Degraded) admission,
// from a Limiter whose fail mode is to deny.
func TestLeaseWaiterKeepsItsFailMode(t *testing.T) {
	_, st := newMini(t)
	h := &hungSignal{Store: st, started: make(chan struct{})}
	strict := newLimiter(t, h, limiter.WithTimeout(300*time.Millisecond), limiter.WithFailMode(limiter.FailClosed), limiter.WithQuotaLease(10))
	open, err := strict.With(limiter.WithFailMode(limiter.FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l := limiter.PerSecond(1000)
	done := make(chan limiter.Result)
	go func() { r, _ := open.Allow(ctx, "hot", l); done <- r }()
	<-h.started // the FailOpen copy is taking the subject's lease
	r, err := strict.Allow(ctx, "hot", l)
	ro := <-done
	t.Logf("FailOpen copy: Allowed=%v Degraded=%v; FailClosed limiter: Allowed=%v Degraded=%v err=%v", ro.Allowed, ro.Degraded, r.Allowed, r.Degraded, err)
	if err != nil || r.Allowed {
		t.Errorf("FailClosed Limiter during an outage returned Allowed=%v Degraded=%v Cause=%v err=%v; want a Degraded denial", r.Allowed, r.Degraded, r.Cause, err)
	}
}
