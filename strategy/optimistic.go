package strategy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// ErrNoWatcher is an Optimistic strategy given a store without
// store.Watcher. It wraps store.ErrNotSupported; limiter.New reports it
// wrapped in limiter.ErrUnsuitableStore.
var ErrNoWatcher = fmt.Errorf("strategy: optimistic needs a store.Watcher (WATCH, reads and MULTI/EXEC on one connection): %w", store.ErrNotSupported)

// Defaults of an Optimistic strategy.
const (
	// DefaultMaxAttempts is how many transactions a decision tries before
	// ErrContention.
	DefaultMaxAttempts = 16
	// DefaultBackoffBase and DefaultBackoffMax bound the jittered
	// exponential wait after an aborted transaction: attempt k waits a
	// random time in [0, min(max, base·2^(k-1))).
	DefaultBackoffBase = 500 * time.Microsecond
	DefaultBackoffMax  = 50 * time.Millisecond
)

// Optimistic is the fixed window of FixedWindow without Lua, by optimistic
// transactions (the WATCH/MULTI design done right):
//
//	WATCH keys                       (pins one connection)
//	GET key; PTTL key; ...           (one pipeline, outside MULTI)
//	decide in Go, as the Lua script does
//	MULTI; SET key cost PX window | INCRBY key cost; ...; EXEC
//
// The reads run outside MULTI: inside it they would only be queued, and a
// GET inside MULTI reads nothing. A write of the watched keys by anyone
// between the WATCH and the EXEC, their expiry included, aborts the EXEC;
// the decision is then retried, after a jittered exponential backoff, up
// to MaxAttempts times, then fails with limiter.ErrContention (nothing
// written). A lost EXEC reply (store.ErrUnknownOutcome) is never retried.
//
// Guarantees:
//   - optimistic, and exact while attempts last: every admission is an EXEC
//     of writes decided on the values it watched, so at most Rate is
//     admitted per window, and exactly Rate when the retry bound is not
//     reached;
//   - denied requests consume nothing and write nothing (a key found
//     without TTL is repaired, as by FixedWindow, in the same kind of
//     EXEC). A denial needs no EXEC: each GET reads one key atomically, a
//     counter only grows within its window, so a limit found full was full
//     at that instant and the denial is correct as of then. Validating it
//     with an EXEC would only add aborts and retries under contention;
//   - the window never slides: a new key is written with SET ... PX, an
//     existing one with INCRBY, which keeps its expiry; a key found without
//     expiry, or with one further than its Period (the Period was
//     shortened), gets one (PEXPIRE window) in the same EXEC. A key that
//     expires between the reads and the EXEC aborts the EXEC (Redis 6.0.9
//     and later treat an expired watched key as modified), so no INCRBY
//     ever recreates a key without TTL;
//   - a counter that is not a non-negative decimal integer (or a key of
//     another type) is limiter.ErrCorruptCounter, found before anything is
//     written;
//   - time source: Redis key expiry; the app clock is never read;
//   - round trips: 3 for a writing decision (WATCH, reads, EXEC) and 3 for a
//     denial (WATCH, reads, UNWATCH by the adapter), per attempt; 1 for a
//     peek or a cost above the limit (reads only, no WATCH);
//   - boundary bursts: up to 2×Rate in any interval one Period long;
//   - keys per decision: one per limit, in one Cluster slot (the WATCH
//     pins the slot's node). While the slot is migrated, a WATCH a node
//     refuses with TRYAGAIN (the keys split between the nodes: nothing
//     ran) is sent again after store.TryAgainPause, without counting as
//     an attempt; the adapters follow a WATCH's MOVED and ASK; and reads
//     or a transaction refused because the slot moved after the WATCH
//     (MOVED, ASK or TRYAGAIN: a migration, a failover) are an aborted
//     attempt (store.ErrTxAborted), retried as above;
//   - Redis 6.0.9 or later for the expiry rule above; a store implementing
//     store.Watcher (limiter.New checks it).
type Optimistic struct {
	maxAttempts int
	base, cap   time.Duration
}

// OptimisticOption configures an Optimistic.
type OptimisticOption func(*Optimistic)

// WithMaxAttempts sets how many transactions one decision tries before
// limiter.ErrContention (default DefaultMaxAttempts; at least 1).
func WithMaxAttempts(n int) OptimisticOption {
	return func(o *Optimistic) { o.maxAttempts = max(n, 1) }
}

// WithBackoff sets the jittered exponential backoff between attempts:
// attempt k waits a random time below min(maxWait, base·2^(k-1)).
func WithBackoff(base, maxWait time.Duration) OptimisticOption {
	return func(o *Optimistic) { o.base, o.cap = max(base, 0), max(maxWait, 0) }
}

// NewOptimistic returns the Optimistic strategy.
func NewOptimistic(opts ...OptimisticOption) *Optimistic {
	o := &Optimistic{maxAttempts: DefaultMaxAttempts, base: DefaultBackoffBase, cap: DefaultBackoffMax}
	for _, opt := range opts {
		if opt != nil { // an option chosen conditionally and left unset
			opt(o)
		}
	}
	return o
}

// CheckStore implements limiter.StoreChecker: the store must implement
// store.Watcher.
func (o *Optimistic) CheckStore(st store.Store) error {
	if _, ok := st.(store.Watcher); !ok {
		return fmt.Errorf("store %T: %w", st, ErrNoWatcher)
	}
	return nil
}

// keyState is one limit's counter as read.
type keyState struct {
	count  int64
	exists bool
	pttl   int64
}

// Decide implements limiter.Strategy.
func (o *Optimistic) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	if req.DryRun || req.Cost == 0 || neverFits(req) {
		// Nothing to write: one pipelined read decides, no WATCH. A
		// writing call that finds a key without TTL goes on to repair it.
		var ks [limiter.MaxLimits]keyState
		if err := readStates(ctx, st.Do, req, ks[:len(req.Limits)]); err != nil {
			return limiter.Result{}, fmt.Errorf("strategy: optimistic: %w", err)
		}
		if req.DryRun || req.Cost == 0 || !needsRepair(req, ks[:len(req.Limits)]) {
			res, _ := decideStates(req, ks[:len(req.Limits)])
			return res, nil
		}
	}
	w, ok := st.(store.Watcher)
	if !ok {
		return limiter.Result{}, fmt.Errorf("store %T: %w", st, ErrNoWatcher)
	}
	for attempt, tries := 1, 0; ; attempt++ {
		var res limiter.Result
		err := w.Watch(ctx, req.Keys, func(tx store.Tx) error {
			var err error
			res, err = o.attempt(ctx, tx, req)
			return err
		})
		if err == nil {
			return res, nil
		}
		if errors.Is(err, store.ErrTryAgain) {
			// a Cluster node refused the WATCH or the transaction, keys
			// a slot's migration has split: nothing ran; sent again
			// once the migration has moved the rest
			if tries++; store.TryAgainPause(ctx, tries) {
				attempt--
				continue
			}
		}
		if !errors.Is(err, store.ErrTxAborted) {
			return limiter.Result{}, fmt.Errorf("strategy: optimistic: %w", err)
		}
		if attempt >= o.maxAttempts {
			return limiter.Result{}, fmt.Errorf("%w: %d transactions aborted by concurrent writers", limiter.ErrContention, attempt)
		}
		if err := o.backoff(ctx, attempt); err != nil {
			return limiter.Result{}, fmt.Errorf("%w: gave up after %d aborted transactions: %w", limiter.ErrContention, attempt, err)
		}
	}
}

// backoff waits before attempt+1: a random time below
// min(cap, base·2^(attempt-1)), or until ctx is done.
func (o *Optimistic) backoff(ctx context.Context, attempt int) error {
	ceil := o.cap
	if attempt-1 < 30 {
		ceil = min(o.cap, o.base<<(attempt-1))
	}
	if ceil <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(rand.N(ceil))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// attempt reads the watched counters on tx, decides, and writes in one
// MULTI/EXEC when there is anything to write.
func (o *Optimistic) attempt(ctx context.Context, tx store.Tx, req limiter.Request) (limiter.Result, error) {
	n := len(req.Limits)
	var ks [limiter.MaxLimits]keyState
	if err := readStates(ctx, tx.Do, req, ks[:n]); err != nil {
		return limiter.Result{}, err
	}
	res, allowed := decideStates(req, ks[:n])
	cmds := make([]store.Cmd, 0, 2*n)
	for i, l := range req.Limits {
		if ks[i].needsRepair(l) {
			cmds = append(cmds, store.Cmd{Name: "PEXPIRE", Args: []any{req.Keys[i], l.Period.Milliseconds()}})
		}
	}
	if allowed {
		for i, l := range req.Limits {
			if ks[i].exists {
				cmds = append(cmds, store.Cmd{Name: "INCRBY", Args: []any{req.Keys[i], req.Cost}})
			} else {
				cmds = append(cmds, store.Cmd{Name: "SET", Args: []any{req.Keys[i], req.Cost, "PX", l.Period.Milliseconds()}})
			}
		}
	}
	if len(cmds) == 0 {
		return res, nil
	}
	rs, err := tx.Exec(ctx, cmds...)
	if err != nil {
		return limiter.Result{}, err
	}
	for i, r := range rs {
		if r.Err != nil {
			return limiter.Result{}, fmt.Errorf("%s: %w", cmds[i].Name, r.Err)
		}
	}
	return res, nil
}

// readStates reads every limit's counter and PTTL in one pipeline.
func readStates(ctx context.Context, do func(context.Context, ...store.Cmd) ([]store.Reply, error), req limiter.Request, ks []keyState) error {
	cmds := make([]store.Cmd, 0, 2*len(req.Keys))
	for _, k := range req.Keys {
		cmds = append(cmds, store.Cmd{Name: "GET", Args: []any{k}}, store.Cmd{Name: "PTTL", Args: []any{k}})
	}
	rs, err := do(ctx, cmds...)
	if err != nil {
		return err
	}
	if len(rs) != len(cmds) {
		return fmt.Errorf("%d replies for %d commands", len(rs), len(cmds))
	}
	for i, k := range req.Keys {
		get, pttl := rs[2*i], rs[2*i+1]
		if pttl.Err != nil {
			return fmt.Errorf("PTTL %s: %w", k, pttl.Err)
		}
		p, err := store.Int64(pttl.Val)
		if err != nil {
			return fmt.Errorf("PTTL %s: %w", k, err)
		}
		switch {
		case errors.Is(get.Err, store.ErrNil):
			ks[i] = keyState{pttl: -2}
			continue
		case get.Err != nil:
			return fmt.Errorf("GET %s: %w", k, corruptErr(get.Err))
		}
		n, err := parseCounter(get.Val)
		if err != nil {
			return fmt.Errorf("GET %s: %w", k, err)
		}
		if p == -2 || p == 0 {
			// Expired between the GET and the PTTL: gone. A write decided
			// on it is aborted by the WATCH anyway. Or in its expiry
			// millisecond (PTTL 0), which Redis keeps it through and which
			// belongs to the next window: over, as if gone (a write SETs
			// the next window over it).
			ks[i] = keyState{pttl: -2}
			continue
		}
		ks[i] = keyState{count: n, exists: true, pttl: p}
	}
	return nil
}

// needsRepair reports a counter found without TTL, or with one longer than
// its window (the limit's Period was shortened).
func needsRepair(req limiter.Request, ks []keyState) bool {
	for i, l := range req.Limits {
		if ks[i].needsRepair(l) {
			return true
		}
	}
	return false
}

func (k keyState) needsRepair(l limiter.Limit) bool {
	return k.exists && (k.pttl == -1 || k.pttl > l.Period.Milliseconds())
}

// decideStates decides req on the counters read, with the rules of the
// FixedWindow script, and reports whether the cost is to be consumed.
func decideStates(req limiter.Request, ks []keyState) (limiter.Result, bool) {
	allowed := true
	for i, l := range req.Limits {
		if !fits(ks[i].count, req.Cost, l.Rate) {
			allowed = false
		}
	}
	write := allowed && !req.DryRun && req.Cost > 0
	var b limiter.Binder
	for i, l := range req.Limits {
		ttl := l.Period
		// (a call that writes repairs a window longer than its Period,
		// expiring it one Period from now; one that writes nothing
		// reports it as long as it is)
		if ks[i].exists && ks[i].pttl > 0 && (!ks[i].needsRepair(l) || req.DryRun || req.Cost == 0) {
			ttl = time.Duration(ks[i].pttl) * time.Millisecond
		}
		used := ks[i].count
		if write {
			used += req.Cost
		}
		var retry time.Duration
		switch {
		case req.Cost > l.Rate:
			retry = -1
		case !fits(ks[i].count, req.Cost, l.Rate):
			retry = ttl
		}
		b.Add(i, l.Rate-used, ttl, retry)
	}
	return b.Result(allowed), write
}
