package goredis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/store"
)

// DefaultSharedPipelines is how many round trips of script calls a Store
// keeps in flight at most, on a *redis.Client and per master of a
// *redis.ClusterClient, before further calls share them (see
// WithSharedPipelines).
const DefaultSharedPipelines = 2

// WithSharedPipelines sets how many script calls' round trips may be in
// flight at once before further calls share them, on a *redis.Client (one
// server, or a failover client) and per master on a *redis.ClusterClient
// (there for calls that go-redis bounds by their context itself: with
// ContextTimeoutEnabled, under a context with a deadline or one that is
// never cancelled): a call that finds fewer than n in flight
// goes at once on its own connection, as it would without sharing; one
// that finds n waits, with the others that arrive meanwhile, for the first
// of them to return, and they then leave together in one pipeline. So a
// lone caller waits for nothing, and under load the decisions of many
// goroutines share a round trip: fewer system calls and less of the
// server's time per decision, more decisions per second. n ≤ 0 turns
// sharing off (every call on its own connection). The default is
// DefaultSharedPipelines. It changes nothing on a Ring or with
// WithAutoPipeline.
//
// Each call keeps its own outcome and its own deadline: a call whose
// context ends while it waits to leave is not sent (a known outcome); one
// whose context ends after its pipeline left is abandoned as
// store.ErrUnknownOutcome when it was written, as any call. A pipeline
// waits for its replies until the latest deadline of its calls (go-redis's
// ReadTimeout when one has none, or without ContextTimeoutEnabled) and
// carries the context values of the call that sends it, for go-redis's
// hooks. A pipeline all of whose calls have given up no longer counts
// against n, even if its reply never comes.
func WithSharedPipelines(n int) Option {
	return func(s *Store) { s.shareN = n }
}

// sharing lets concurrent script calls share pipelines: at most max are in
// flight; the calls that find them all busy queue, and when one returns,
// the queue leaves as the next pipeline, sent by the first call in it.
type sharing struct {
	mu    sync.Mutex
	busy  int // pipelines (or lone calls) in flight
	max   int
	queue []*waiter
}

// waiter is a script call queued to share a pipeline.
type waiter struct {
	cmd *redis.Cmd
	g   *guard
	// deadline is the caller's context's, zero for none.
	deadline time.Time
	// wake receives the pipeline this call is to send (it is the first
	// in it), then nil once its reply is in cmd; buffered so that neither
	// send waits for the caller, who may have left.
	wake chan []*waiter
	// fl is the pipeline this call left in, set (under sharing.mu) when
	// the queue leaves.
	fl *flight
}

// flight is one pipeline of queued calls in flight. Its slot is freed
// when the pipeline returns or when every one of its calls has given up
// on it, whichever comes first: a pipeline that never returns (a server
// gone silent, with socket timeouts turned off) must not hold the slot
// after its callers left.
type flight struct {
	waiting atomic.Int32 // calls that have not given up
	freed   atomic.Bool
}

// free frees f's slot, once.
func (f *flight) free(sh *sharing) {
	if f.freed.CompareAndSwap(false, true) {
		sh.leave()
	}
}

// gaveUp records that one of f's calls gave up on it.
func (f *flight) gaveUp(sh *sharing) {
	if f.waiting.Add(-1) == 0 {
		f.free(sh)
	}
}

// enter reports whether a call may go at once, alone (a slot is taken);
// otherwise it queues w and the caller waits on w.wake.
func (sh *sharing) enter(w func() *waiter) (*waiter, bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.busy < sh.max {
		sh.busy++
		return nil, true
	}
	q := w()
	sh.queue = append(sh.queue, q)
	return q, false
}

// leave frees a slot when a pipeline (or lone call) returns: the calls
// queued meanwhile take it, as the next pipeline, sent by the first.
func (sh *sharing) leave() {
	sh.mu.Lock()
	if len(sh.queue) == 0 {
		sh.busy--
		sh.mu.Unlock()
		return
	}
	next := sh.queue
	sh.queue = nil
	fl := &flight{}
	fl.waiting.Store(int32(len(next)))
	for _, w := range next {
		w.fl = fl
	}
	sh.mu.Unlock()
	next[0].wake <- next
}

// withdraw takes w out of the queue and reports whether it was still
// there (then it will never be sent).
func (sh *sharing) withdraw(w *waiter) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if i := slices.Index(sh.queue, w); i >= 0 {
		sh.queue = slices.Delete(sh.queue, i, i+1)
		return true
	}
	return false
}

// runShared sends a script call when pipelines are shared: alone when a
// slot is free, else in the next shared pipeline. It returns when cmd has
// its reply, or an error when the caller's context ended first.
func (s *Store) runShared(ctx context.Context, sh *sharing, call *evalCall, cmd *redis.Cmd) error {
	w, alone := sh.enter(func() *waiter {
		// Shared, a sealed call is sent as one the server refuses, not
		// as a write that fails its whole pipeline.
		call.g.shared = true
		w := &waiter{cmd: cmd, g: &call.g, wake: make(chan []*waiter, 1)}
		w.deadline, _ = ctx.Deadline()
		return w
	})
	if alone {
		defer sh.leave()
		return s.send(ctx, call, cmd)
	}
	for {
		select {
		case batch := <-w.wake:
			if batch == nil {
				return nil // the reply is in cmd
			}
			if len(batch) == 1 {
				defer w.fl.free(sh)
				return s.send(ctx, call, cmd)
			}
			go s.sendShared(ctx, sh, batch)
		case <-ctx.Done():
			return s.abandonShared(ctx, sh, w)
		}
	}
}

// abandonShared ends a queued call whose context ended before its reply
// came.
func (s *Store) abandonShared(ctx context.Context, sh *sharing, w *waiter) error {
	err := s.dials.explain(ctx.Err())
	if sh.withdraw(w) {
		return fmt.Errorf("goredis: %w: %w", errAbandoned, err)
	}
	// Taken into a pipeline: perhaps as the call that sends it.
	select {
	case batch := <-w.wake:
		if batch == nil {
			return nil // the reply came meanwhile
		}
		w.g.seal() // sent as a call the server refuses unrun
		if len(batch) == 1 {
			w.fl.free(sh)
		} else {
			go s.sendShared(ctx, sh, batch)
			w.fl.gaveUp(sh)
		}
		return fmt.Errorf("goredis: %w: %w", errAbandoned, err)
	default:
	}
	w.fl.gaveUp(sh)
	if w.g.seal() {
		return fmt.Errorf("goredis: %w: %w", errAbandoned, err)
	}
	return fmt.Errorf("goredis: %w: %w: %w", store.ErrUnknownOutcome, errAbandoned, err)
}

// sendShared sends batch in one pipeline, hands each call its reply and
// frees the slot. The pipeline carries ctx's values but not its end: it
// waits until the latest of its calls' deadlines, each call leaving at its
// own.
func (s *Store) sendShared(ctx context.Context, sh *sharing, batch []*waiter) {
	ctx = context.WithoutCancel(ctx)
	if !s.enforce {
		var latest time.Time
		for _, w := range batch {
			if w.deadline.IsZero() {
				latest = time.Time{}
				break
			}
			if w.deadline.After(latest) {
				latest = w.deadline
			}
		}
		if !latest.IsZero() {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, latest)
			defer cancel()
		}
	}
	p := s.c.Pipeline()
	for _, w := range batch {
		_ = p.Process(ctx, w.cmd)
	}
	_, execErr := p.Exec(ctx)
	batch[0].fl.free(sh)
	for _, w := range batch {
		if v, err := w.cmd.Result(); v == nil && err == nil {
			// never processed: the pipeline failed before it
			if execErr == nil {
				execErr = errors.New("no reply")
			}
			w.cmd.SetErr(execErr)
		}
		w.wake <- nil
	}
}

// nodeSharing shares pipelines per master of a ClusterClient.
type nodeSharing struct {
	cc  *redis.ClusterClient
	max int
	mu  sync.Mutex
	m   map[string]*sharing
}

// sharingFor returns the sharing that a script call on keys under ctx
// takes part in, or nil when it goes alone. On a ClusterClient, the
// sharing of its first key's master, looked up in the client's slot map:
// only when go-redis bounds the call by ctx itself (see bounds), since the
// client's first lookup loads the map from the Cluster.
func (s *Store) sharingFor(ctx context.Context, keys []string) *sharing {
	if s.sh != nil || s.nodes == nil {
		return s.sh
	}
	if len(keys) == 0 || s.bounds(ctx) {
		return nil
	}
	m, err := s.nodes.cc.MasterForKey(ctx, keys[0])
	if err != nil {
		return nil // the call alone meets the failure and reports it
	}
	addr := m.Options().Addr
	n := s.nodes
	n.mu.Lock()
	defer n.mu.Unlock()
	sh := n.m[addr]
	if sh == nil {
		if len(n.m) >= maxSharedNodes {
			clear(n.m) // masters that left; the calls in flight keep theirs
		}
		sh = &sharing{max: n.max}
		n.m[addr] = sh
	}
	return sh
}

// maxSharedNodes bounds the masters a Store keeps a sharing for.
const maxSharedNodes = 1024
