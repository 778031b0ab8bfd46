package strategy_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// seqWatcher refuses its first Watch with TRYAGAIN (nothing ran) and
// aborts the transaction of its second (a concurrent writer), then runs.
type seqWatcher struct {
	store.Store
	w store.Watcher
	n atomic.Int64
}

func (s *seqWatcher) Watch(ctx context.Context, keys []string, fn func(store.Tx) error) error {
	switch s.n.Add(1) {
	case 1:
		return store.ErrTryAgain
	case 2:
		return store.ErrTxAborted
	}
	return s.w.Watch(ctx, keys, fn)
}

// Optimistic doc: "a WATCH a node refuses with TRYAGAIN ... is sent again
// after store.TryAgainPause, without counting as an attempt"; WithMaxAttempts:
// "how many transactions one decision tries before limiter.ErrContention".
func TestTryAgainNotAnAttempt(t *testing.T) {
	_, st := newMini(t)
	sw := &seqWatcher{Store: st, w: st.(store.Watcher)}
	lim := newLim(t, sw, strategy.NewOptimistic(strategy.WithMaxAttempts(2)))
	r, err := lim.Allow(context.Background(), "u", limiter.PerMinute(5))
	if err != nil || !r.Allowed {
		t.Errorf("a TRYAGAIN, then 1 aborted transaction, with 2 attempts allowed = %+v, %v (ErrContention: %v); want admitted on the 2nd transaction", r, err, errors.Is(err, limiter.ErrContention))
	}
}
