package limiter

import (
	"context"

	"github.com/quotagate/limiter/store"
)

// The types in this file are for those who write a Strategy; a user of
// the Limiter needs none of them.

// Request is what a Strategy is asked to decide: one counter key per limit,
// all in one Cluster hash slot, and the cost to consume from each.
type Request struct {
	// Keys holds one key per limit, built by the Limiter. (The Limiter
	// leaves it nil for this module's strategies that name their keys with
	// AppendKey, when it calls them directly; every other Strategy,
	// including one that embeds such a strategy, gets it built.)
	Keys []string
	// Limits are the call's limits, validated.
	Limits []Limit
	// Cost is the amount to consume from every limit; 0 asks for the state
	// and writes nothing.
	Cost int64
	// DryRun decides as for Cost but writes nothing (Peek).
	DryRun bool

	// When Keys is nil, prefix and tag (the subject as it stands between
	// a key's braces) lay the keys out for AppendKey.
	prefix, tag string
}

// AppendKey appends the key of limit i, Keys[i], to dst and returns the
// extended buffer: Keys[i] itself when Keys is set, else the key laid out
// as the Limiter lays it out. This module's epoch-aligned strategies, whose
// Redis keys extend the request's keys (a window's index after the key),
// name them with it, so that the Limiter need not build Keys for them.
func (r *Request) AppendKey(dst []byte, i int) []byte {
	if r.Keys != nil || r.tag == "" {
		return append(dst, r.Keys[i]...)
	}
	return keyBuilder{prefix: r.prefix}.appendKey(dst, r.tag, r.Limits[i])
}

// Strategy decides requests against a Store. Implementations are safe for
// concurrent use, consume from every limit or from none, and declare their
// guarantees in their doc comment. After a Decide that returns a nil error,
// nothing may use req's slices any more: the Limiter reuses them.
type Strategy interface {
	// Decide admits or denies req. A denial is a Result with Allowed false;
	// an error means Redis could not decide. Strategies build the Result
	// with a Binder.
	Decide(ctx context.Context, st store.Store, req Request) (Result, error)
}

// Resetter is implemented by strategies whose counters are not exactly the
// request's keys. Without it, Reset deletes the keys.
type Resetter interface {
	// Reset forgets the state of keys.
	Reset(ctx context.Context, st store.Store, keys []string) error
}

// RequestResetter is implemented by strategies whose counters depend on the
// limits as well as the keys (time-bucketed keys need each limit's Period).
// Reset prefers it to Resetter; req carries the keys and limits, Cost 0.
type RequestResetter interface {
	// ResetRequest forgets the state of req's keys for req's limits.
	ResetRequest(ctx context.Context, st store.Store, req Request) error
}

// StoreChecker is implemented by strategies that need more of a store than
// the Store interface (an optimistic strategy needs store.Watcher). New
// calls CheckStore once, so a mismatch is a construction error, not a
// failure of every call.
type StoreChecker interface {
	// CheckStore returns nil when the strategy can run on st, else why not
	// (wrapping store.ErrNotSupported for a missing ability).
	CheckStore(st store.Store) error
}

// LimitChecker is implemented by strategies that cannot hold every limit
// the Limiter accepts (a sliding log holds at most 10 000 per window): a
// limit it refuses is refused by every call, whatever the fail mode.
// Limiter.CheckLimits asks it, so that such a limit is found when a rule
// set is loaded, not at its first call.
type LimitChecker interface {
	// CheckLimit returns nil when the strategy can decide l (a limit the
	// Limiter accepts), else why not, wrapping ErrInvalidLimit. It does no
	// I/O.
	CheckLimit(l Limit) error
}

// ScriptStrategy is implemented by strategies that decide a request with
// one script call and nothing else. Limiter.AllowMany sends the calls of
// many requests in one round trip per server (store.Batcher); a strategy
// without it decides each request with Decide.
type ScriptStrategy interface {
	Strategy
	// BatchScript returns the script that decides req and its arguments
	// (its keys are req.Keys). An error is bad input, found before any I/O.
	// The arguments may be shared between calls, and are never changed.
	BatchScript(req Request) (*store.Script, []any, error)
	// BatchResult reads the script's reply to req; r.Err is its error.
	// Once AllowMany returns, nothing (an error returned here included)
	// may use req's slices any more: AllowMany reuses them.
	BatchResult(req Request, r store.Reply) (Result, error)
}

// ManyScriptStrategy is a ScriptStrategy whose scripts each have a
// companion that decides several requests in one call, each exactly as the
// script decides it alone. On a store that reaches one server
// (store.OneServer), Limiter.AllowMany sends up to 64 requests in each
// such call: the server runs one script instead of one per request.
type ManyScriptStrategy interface {
	ScriptStrategy
	// ManyScript returns the companion of s (a script BatchScript
	// returns), or nil when s has none. Its keys are the requests' keys,
	// one request's after another's; its arguments, for each request in
	// turn, the number of its keys, the number of its arguments, then its
	// arguments. It returns an array of one element per request: s's reply
	// to that request, which BatchResult reads, or s's error reply.
	ManyScript(s *store.Script) *store.Script
}
