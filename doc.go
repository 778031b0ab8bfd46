// Package limiter is a rate-limiting framework on Redis whose correctness is
// proven, not assumed.
//
// A Limiter decides requests for a key (a user, a phone number, an API key,
// an appkey+method) against one or more limits passed with each call:
//
//	lim, err := limiter.New(goredis.New(rdb), strategy.NewFixedWindow())
//	r, err := lim.Allow(ctx, "user:42", limiter.PerSecond(10), limiter.PerDay(10000))
//	if err == nil && !r.Allowed {
//		// 429, Retry-After: r.RetryAfter
//	}
//
// Several limits in one call are one atomic decision: a request refused by
// any limit consumes nothing from the others. A denial is a Result, not an
// error; errors are bad input (sentinels such as ErrInvalidKey, returned
// before any I/O) or a backend that could not decide (handled by the
// FailMode: return the error, fail open, or fail closed with the Result
// marked Degraded).
//
// AllowMany makes many independent decisions at once (Ask, Answer), in one
// pipeline per Redis server when the strategy is one script (a
// ScriptStrategy, or the module's AlignedWindow) and the store can batch
// (store.Batcher).
//
// Wait and WaitN block until a request is admitted, sleeping each denial's
// RetryAfter, or return at once when no wait can help (ErrNeverAdmitted,
// ErrWaitTooLong).
//
// Concurrency caps the requests a subject has in flight at once with leases
// held in Redis (Acquire, Lease.Release, Lease.Extend); a lease expires by
// itself after its TTL, so a crashed holder cannot keep its slot.
//
// The algorithm is a Strategy (package strategy: fixed windows, GCRA, a
// token bucket, a sliding window counter, a sliding log) or, for leases, a
// Leaser (strategy.Concurrency), written once against the small store.Store
// contract (package store) that adapters implement for each Redis client
// (package store/goredis, ...). Keys are laid out as
// prefix:{subject}:rule, so all keys of a decision share one Redis Cluster
// hash slot whatever the subject holds.
//
// A user needs the Limiter (New, Allow, AllowN, AllowMany, Peek, Reset,
// Wait), Limit, Ask, Answer, Result, the options, the fail modes and the
// errors; Concurrency, InFlight and Lease for leases; Observer for metrics.
// The rest is for those who write a strategy (Strategy, Request, Binder,
// Resetter, RequestResetter, StoreChecker, ScriptStrategy; Leaser,
// LeaseRequest, LeaseState): those types live in
// this package because the Limiter calls them, and a strategy of your own
// is proven with package conformance.
//
// Package conformance is the suite that proves a strategy and a store
// correct: exact admission under contention, no key without a TTL, windows
// that do not slide, no double counting after a lost reply. Run it on your
// own strategy or adapter from your tests, or with `limiter check`.
package limiter
