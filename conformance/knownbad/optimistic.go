package knownbad

import (
	"context"
	"errors"
	"fmt"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// Hand-written WATCH/MULTI/EXEC loops, and how they go wrong.

// ErrorsAsContention is a retry loop around an optimistic strategy's
// single attempt that counts every failed attempt as an aborted
// transaction, whatever failed, but a corrupt counter (which retrying
// cannot mend): "for i := 0; i < n; i++ { if err := try(); err == nil {
// return } }; return ErrContention". A lost connection or a timeout is
// then reported as contention, which Redis answered: the Limiter's
// FailOpen, told that the key is hot, denies instead of admitting, and
// nothing tells the outage from a hot key. (A lost EXEC reply is tried
// again too, and counted twice.)
type ErrorsAsContention struct {
	Strategy limiter.Strategy // the optimistic strategy wrapped, one attempt per decision
	Attempts int              // attempts per decision (at least 1)
}

// Decide implements limiter.Strategy, wrongly.
func (s ErrorsAsContention) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	var last error
	for range max(s.Attempts, 1) {
		r, err := s.Strategy.Decide(ctx, st, req)
		if err == nil {
			return r, nil
		}
		if errors.Is(err, limiter.ErrCorruptCounter) {
			return r, err
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return limiter.Result{}, fmt.Errorf("%w (the last attempt: %v)", limiter.ErrContention, last)
}

// CheckStore implements limiter.StoreChecker for the wrapped strategy.
func (s ErrorsAsContention) CheckStore(st store.Store) error {
	if sc, ok := s.Strategy.(limiter.StoreChecker); ok {
		return sc.CheckStore(st)
	}
	return nil
}

// ExecWithoutMulti wraps st so that a watched connection's Exec sends its
// commands as a plain pipeline, without MULTI and EXEC, as an adapter
// whose Tx.Exec calls its client's Pipelined where TxPipelined was meant
// does: the WATCH guards nothing, a concurrent writer aborts nothing, and
// a connection lost among the writes leaves some of them done.
func ExecWithoutMulti(st store.Store) store.Store { return execWithoutMulti{st} }

type execWithoutMulti struct{ store.Store }

func (s execWithoutMulti) Watch(ctx context.Context, keys []string, fn func(store.Tx) error) error {
	w, ok := s.Store.(store.Watcher)
	if !ok {
		return fmt.Errorf("knownbad: %T: no Watch: %w", s.Store, store.ErrNotSupported)
	}
	return w.Watch(ctx, keys, func(tx store.Tx) error { return fn(pipelinedTx{tx}) })
}

// pipelinedTx is a pinned connection whose Exec is a plain pipeline.
type pipelinedTx struct{ store.Tx }

func (t pipelinedTx) Exec(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	return t.Tx.Do(ctx, cmds...)
}

// ContentionUnnamed wraps an optimistic strategy and reports its giving up
// under contention with an error of its own ("too many retries"), not
// limiter.ErrContention, as a hand-written loop that never heard of the
// sentinel does (or one that wraps it with %v): a caller cannot tell a hot
// key from a failure of Redis, and the Limiter's FailOpen, which denies
// under contention, admits.
type ContentionUnnamed struct {
	Strategy limiter.Strategy // the optimistic strategy wrapped
}

// Decide implements limiter.Strategy, wrongly.
func (s ContentionUnnamed) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	r, err := s.Strategy.Decide(ctx, st, req)
	if errors.Is(err, limiter.ErrContention) {
		return limiter.Result{}, fmt.Errorf("knownbad: too many retries: %v", err)
	}
	return r, err
}

// CheckStore implements limiter.StoreChecker for the wrapped strategy.
func (s ContentionUnnamed) CheckStore(st store.Store) error {
	if sc, ok := s.Strategy.(limiter.StoreChecker); ok {
		return sc.CheckStore(st)
	}
	return nil
}
