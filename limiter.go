package limiter

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/quotagate/limiter/internal/derive"
	"github.com/quotagate/limiter/store"
)

// Errors returned before any I/O for bad input; a call that returns one of
// them has written nothing to Redis. Match them with errors.Is.
var (
	// ErrInvalidKey is an empty key (subject).
	ErrInvalidKey = errors.New("limiter: invalid key")
	// ErrInvalidLimit is a call without limits, or a limit whose rate, burst,
	// period or name is out of bounds, or two limits sharing one counter.
	ErrInvalidLimit = errors.New("limiter: invalid limit")
	// ErrInvalidCost is a negative cost.
	ErrInvalidCost = errors.New("limiter: invalid cost")
	// ErrNilStore is a nil store given to New.
	ErrNilStore = errors.New("limiter: nil store")
	// ErrNilStrategy is a nil strategy given to New.
	ErrNilStrategy = errors.New("limiter: nil strategy")
	// ErrInvalidOption is an option out of bounds (a prefix with braces, a
	// negative timeout, an unknown fail mode).
	ErrInvalidOption = errors.New("limiter: invalid option")
	// ErrContention is an optimistic strategy giving up: every attempt's
	// transaction was aborted by a concurrent writer (or the context ended
	// between attempts), so nothing was written and nothing was decided.
	// Redis answered, so it is never an admission: FailError returns it;
	// FailOpen and FailClosed turn it into a Degraded denial with it as
	// the Cause.
	ErrContention = errors.New("limiter: contention: optimistic transaction retries exhausted")
	// ErrCorruptCounter is a counter key that holds something other than
	// the strategy's counter: text that is not a decimal integer, another
	// type (a key name shared with other data), a value written by another
	// program. The call that met it leaves every one of its limits as it
	// was: it wrote nothing (a script checks every counter first) or took
	// back what it wrote (a strategy without scripts), unless Redis was
	// lost just then.
	ErrCorruptCounter = errors.New("limiter: corrupt counter")
	// ErrUnsuitableStore is a store that lacks an ability the strategy
	// needs (New checks it); the error also wraps the strategy's own reason,
	// typically store.ErrNotSupported.
	ErrUnsuitableStore = errors.New("limiter: store unsuitable for the strategy")
	// ErrNeverAdmitted is Wait's answer to a cost that no wait can admit:
	// it exceeds a limit (the denial's RetryAfter is -1).
	ErrNeverAdmitted = errors.New("limiter: the cost exceeds a limit and is never admitted")
	// ErrWaitTooLong is Wait's answer when the denial's RetryAfter ends
	// after the context's deadline: Wait returns at once instead of
	// sleeping into a deadline it cannot meet.
	ErrWaitTooLong = errors.New("limiter: the wait would outlast the context's deadline")
)

// FailMode says what a call does when Redis cannot decide it (connection
// lost, timeout, a server error).
type FailMode int

const (
	// FailError returns the error; the caller decides. The default.
	FailError FailMode = iota
	// FailOpen admits the request. The Result is Degraded and carries the
	// error in Cause; the error return is nil. ErrContention is the
	// exception: Redis answered, so it is a Degraded denial.
	FailOpen
	// FailClosed denies the request. The Result is Degraded and carries the
	// error in Cause; the error return is nil. Its RetryAfter is the first
	// limit's Period, at most a second: when to ask again, since Redis may
	// answer by then.
	FailClosed
)

// String names the mode.
func (m FailMode) String() string {
	switch m {
	case FailError:
		return "error"
	case FailOpen:
		return "open"
	case FailClosed:
		return "closed"
	}
	return fmt.Sprintf("FailMode(%d)", int(m))
}

// Result is the outcome of one decision. A denial is a Result, not an error.
type Result struct {
	// Allowed reports whether the request was admitted (and its cost
	// consumed from every limit).
	Allowed bool
	// Remaining is the cost still available in the binding limit.
	Remaining int64
	// ResetAfter is the time until the binding limit is full again.
	ResetAfter time.Duration
	// RetryAfter is, for a denied request, the time until the same request
	// could be admitted; -1 when it never can (its cost exceeds the limit).
	// It is 0 when Allowed.
	RetryAfter time.Duration
	// Limit is the binding limit: for a denied request the one that denied
	// it (the longest wait when several did), otherwise the one with the
	// least remaining.
	Limit Limit
	// Index is the position of Limit among the call's limits.
	Index int
	// Degraded reports a decision made by the fail mode, not by Redis.
	Degraded bool
	// Cached reports a denial repeated from the deny cache (WithDenyCache):
	// Redis denied the same request and cannot admit it before RetryAfter.
	// RetryAfter and ResetAfter count down to the instants Redis gave;
	// Remaining is what Redis reported then, a lower bound for a strategy
	// that refills (GCRA, TokenBucket), whose quota comes back meanwhile.
	Cached bool
	// Leased reports an admission made from this process's quota lease
	// (WithQuotaLease): the units were consumed in Redis before, in the
	// same window.
	Leased bool
	// Cause is the backend error behind a Degraded decision. A decision
	// that Redis made may carry one too, when work after the decision
	// failed (a strategy could not take back a denied request's count):
	// the decision stands, and the Observer is told the error. A denial
	// made for another reason than a lack of quota carries that reason:
	// strategy.ErrStaleWindow, a request that could not be counted in the
	// server's window in time (nothing counted; Remaining shows the quota
	// left).
	Cause error
}

// Limiter decides requests against limits. It is safe for concurrent use.
// Construct it with New.
type Limiter struct {
	st       store.Store
	strategy Strategy
	keys     keyBuilder
	derives  bool // derive.Derives(strategy): Decide gets no Keys
	failMode FailMode
	timeout  time.Duration
	obs      Observer                                         // nil: none (observer.go)
	sleep    func(ctx context.Context, d time.Duration) error // Wait's (wait.go); nil: a timer
	deny     *denyCache                                       // WithDenyCache (denycache.go); nil: none
	leases   *leaseTable                                      // WithQuotaLease (lease.go); nil: none
	now      func() time.Time                                 // WithClock; nil: time.Now
	backs    *giveBacks                                       // Reset and ReturnLeases in progress; shared by copies
}

// Option configures a Limiter.
type Option func(*Limiter) error

// WithPrefix sets the key prefix (default "limiter"). It may not contain
// '{' or '}', so that the subject is always the Cluster hash tag.
func WithPrefix(prefix string) Option {
	return func(l *Limiter) error {
		if err := validPrefix(prefix); err != nil {
			return err
		}
		l.keys.prefix = prefix
		return nil
	}
}

// WithFailMode sets what happens when Redis cannot decide (default
// FailError).
func WithFailMode(m FailMode) Option {
	return func(l *Limiter) error {
		if m < FailError || m > FailClosed {
			return fmt.Errorf("%w: fail mode %d", ErrInvalidOption, int(m))
		}
		l.failMode = m
		return nil
	}
}

// WithTimeout bounds each call: the context passed to the store gets this
// deadline unless it already has an earlier one. 0 (the default) adds no
// deadline: the caller's context and the client's own timeouts apply. A
// strategy that must undo a count it made (strategy.Bucketed taking back a
// denied request) does that on a context of its own, which may hold the
// call a little past the deadline when Redis is slow just then.
func WithTimeout(d time.Duration) Option {
	return func(l *Limiter) error {
		if d < 0 {
			return fmt.Errorf("%w: timeout %s is negative", ErrInvalidOption, d)
		}
		l.timeout = d
		return nil
	}
}

// New returns a Limiter that decides with strategy s on store st. A
// strategy that needs more of the store than it offers (a StoreChecker
// saying so) is ErrUnsuitableStore.
func New(st store.Store, s Strategy, opts ...Option) (*Limiter, error) {
	if isNil(st) {
		return nil, ErrNilStore
	}
	if isNil(s) {
		return nil, ErrNilStrategy
	}
	if sc, ok := s.(StoreChecker); ok {
		if err := sc.CheckStore(st); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnsuitableStore, err)
		}
	}
	l := &Limiter{st: st, strategy: s, keys: keyBuilder{prefix: DefaultPrefix}, backs: new(giveBacks)}
	l.derives = derive.Derives(s)
	if err := l.apply(nil, opts); err != nil {
		return nil, err
	}
	return l, nil
}

// apply applies opts to l, a new Limiter or a copy of from (With). The
// clock (WithClock, or the one a copy inherits) is passed on, whatever the
// options' order, to a deny cache or lease table the options made; those
// a copy shares with from keep from's clock, so With may not set another.
func (l *Limiter) apply(from *Limiter, opts []Option) error {
	inherited := l.now
	l.now = nil // set again only by a WithClock among opts
	for _, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: nil option", ErrInvalidOption)
		}
		if err := o(l); err != nil {
			return err
		}
	}
	l.backs.register(l.deny, l.leases)
	set := l.now != nil
	if !set {
		l.now = inherited
	}
	if l.now == nil {
		return nil
	}
	sharesDeny := from != nil && l.deny != nil && l.deny == from.deny
	sharesLeases := from != nil && l.leases != nil && l.leases == from.leases
	if set && (sharesDeny || sharesLeases) {
		return fmt.Errorf("%w: WithClock on a copy that shares the deny cache or quota leases of the Limiter it was made from (they keep its clock; set the clock in New)", ErrInvalidOption)
	}
	if l.deny != nil && !sharesDeny {
		l.deny.now = l.now
	}
	if l.leases != nil && !sharesLeases {
		l.leases.now = l.now
	}
	return nil
}

// WithClock sets the clock of what the Limiter keeps in the process: the
// deny cache's expiries (WithDenyCache) and the quota leases' windows
// (WithQuotaLease). The default is time.Now. It is for tests on a virtual
// clock, whose Redis TIME and key expiry move only when the test moves
// them: with the wall clock, a denial cached until a window's end would
// outlive a window the test has ended (limitertest sets it). A copy made
// by With keeps its original's clock and passes it on to a deny cache or
// lease table of its own; it may not set another while it shares its
// original's (ErrInvalidOption).
func WithClock(now func() time.Time) Option {
	return func(l *Limiter) error {
		if now == nil {
			return fmt.Errorf("%w: nil clock", ErrInvalidOption)
		}
		l.now = now
		return nil
	}
}

// CheckLimits reports, without I/O, whether every call with limits would
// refuse them as invalid: the Limiter's own bounds (each limit's, as Key
// checks them; at least one limit and at most MaxLimits; no two sharing a
// counter) and the strategy's (LimitChecker), as an error wrapping
// ErrInvalidLimit that names the first limit at fault. A rule set's loader
// calls it so that a limit the strategy cannot hold (above a sliding log's
// 10 000 per window, say) is refused before it is put in force.
func (l *Limiter) CheckLimits(limits ...Limit) error {
	if err := l.keys.check("-", limits); err != nil { // any subject
		return err
	}
	lc, _ := l.strategy.(LimitChecker)
	for _, lim := range limits {
		if lc != nil {
			if err := lc.CheckLimit(lim); err != nil {
				return err
			}
		}
	}
	return nil
}

// isNil reports a nil interface or an interface holding a nil pointer, as
// an adapter's constructor returns for a nil client.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Interface, reflect.Slice, reflect.Chan:
		return rv.IsNil()
	}
	return false
}

// Allow consumes 1 from every limit for key, or nothing if any limit would
// be exceeded.
func (l *Limiter) Allow(ctx context.Context, key string, limits ...Limit) (Result, error) {
	return l.decide(ctx, key, 1, false, limits)
}

// AllowN consumes n from every limit for key, or nothing if any limit would
// be exceeded. n == 0 reads the state and writes nothing; n < 0 is
// ErrInvalidCost.
func (l *Limiter) AllowN(ctx context.Context, key string, n int64, limits ...Limit) (Result, error) {
	return l.decide(ctx, key, n, false, limits)
}

// Peek reports whether a request of cost 1 would be admitted now, and the
// state of the limits, without consuming or writing anything.
func (l *Limiter) Peek(ctx context.Context, key string, limits ...Limit) (Result, error) {
	return l.decide(ctx, key, 1, true, limits)
}

// Reset forgets the counters of key for limits. A ReturnLeases of key's
// leased units in flight ends first (see ReturnLeases). A Reset whose
// deletion may have run without its reply (store.ErrUnknownOutcome) may
// reach Redis later: until a Reset of key ends without that error, key's
// decisions are neither remembered by the deny cache nor kept as quota
// leases (each goes to Redis), so that none rests on a count it deletes. A limit the
// strategy refuses (CheckLimits) is refused here too, before any I/O: its
// key may be that of a limit in use (an unnamed limit's is its period's).
func (l *Limiter) Reset(ctx context.Context, key string, limits ...Limit) error {
	keys, err := l.keys.build(key, limits, nil)
	if err != nil {
		return err
	}
	if err := l.CheckLimits(limits...); err != nil {
		return err
	}
	// While the keys are deleted, no decision is remembered by the deny
	// cache or kept as a lease (a decision sent before the DEL and
	// answered after it saw the old count); what was remembered before is
	// forgotten.
	l.backs.begin(l.keys.prefix, key)
	deleted := true
	defer func() { l.backs.endReset(l.keys.prefix, key, deleted) }()
	// (this Limiter's and its With copies': they count on the same keys)
	l.backs.forgetDenials(l.keys.prefix, key)
	l.backs.forgetLeases(l.keys.prefix, key)
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	// (a return of the subject's leased quota in flight ends first)
	if err := l.backs.resetting(ctx, l.keys.prefix, key, keys); err != nil {
		return fmt.Errorf("limiter: reset: %w", err)
	}
	if r, ok := l.strategy.(RequestResetter); ok {
		err = r.ResetRequest(ctx, l.st, Request{Keys: keys, Limits: limits})
	} else if r, ok := l.strategy.(Resetter); ok {
		err = r.Reset(ctx, l.st, keys)
	} else {
		args := make([]any, len(keys))
		for i, k := range keys {
			args[i] = k
		}
		var r store.Reply
		if r, err = store.DoAgain(ctx, l.st, store.Cmd{Name: "DEL", Args: args}); err == nil {
			err = r.Err
		}
	}
	if err != nil {
		// a deletion that may have run without its reply may also reach
		// Redis later, after decisions made since (endReset)
		deleted = !errors.Is(err, store.ErrUnknownOutcome)
		return fmt.Errorf("limiter: reset: %w", err)
	}
	return nil
}

func (l *Limiter) decide(ctx context.Context, key string, cost int64, dry bool, limits []Limit) (Result, error) {
	if l.obs != nil {
		return l.decideObserved(ctx, key, cost, dry, limits)
	}
	if l.leases != nil && cost > 0 && !dry && len(limits) == 1 && key != "" && limits[0].validate() == nil {
		if r, err, ok := l.decideLeased(ctx, key, cost, limits[0]); ok {
			return r, err
		}
	}
	return l.decideDirect(ctx, key, cost, dry, limits)
}

// decideDirect is decide without quota leases: the deny cache, then Redis.
func (l *Limiter) decideDirect(ctx context.Context, key string, cost int64, dry bool, limits []Limit) (Result, error) {
	if l.deny != nil && cost > 0 {
		if r, ok := l.deny.lookup(l.keys.prefix, key, cost, limits); ok {
			return r, nil
		}
	}
	// A pooled buffer holds the keys and a copy of the limits of a call
	// with few limits, so the caller's variadic slice stays on its stack.
	buf := callBufs.Get().(*callBuf)
	req, err := l.request(buf, key, cost, dry, limits)
	if err != nil {
		buf.release() // nothing was sent
		return Result{}, err
	}
	var sent time.Time
	var mark uint64
	if cost > 0 && !dry {
		// leases of another form of these limits (a rules reload) are not
		// used after this call, which may end their window early
		if end := l.backs.flights(l.keys.prefix, key, limits); end != nil {
			defer end() // (a panicking strategy too)
		}
	}
	if l.deny != nil {
		sent, mark = l.deny.now(), l.backs.mark()
	}
	ctx, cancel := l.withTimeout(ctx)
	res, err := l.strategy.Decide(ctx, l.st, req)
	cancel()
	if err != nil {
		// Not returned to the pool: work the call gave up on may still
		// read the request (a store.Watcher's callback past the deadline).
		return l.failed(err, limits[0])
	}
	buf.release() // Redis answered: nothing reads the request any more
	res.Limit = limits[res.Index]
	// (A Peek's denial is not remembered: it reports the state as it is,
	// which a writing call may repair first, after a rule change.)
	if l.deny != nil && !res.Allowed && cost > 0 && !dry {
		l.deny.remember(l.keys.prefix, key, cost, limits, res, sent, l.backs, mark)
	}
	return res, nil
}

// decideObserved is decide for a Limiter with an observer: the observer
// sees every outcome, exactly once. The decision itself is made by a copy
// of l without the observer, so that decide, the path of every call, has
// no deferred closure.
//
//go:noinline
func (l *Limiter) decideObserved(ctx context.Context, key string, cost int64, dry bool, limits []Limit) (Result, error) {
	c := *l
	c.obs = nil
	start := time.Now()
	res, err := c.decide(ctx, key, cost, dry, limits)
	l.observeCall(ctx, key, res, err, time.Since(start))
	return res, err
}

// request validates a call and builds its Request in buf. It is kept out
// of line, like failed, so that the frame of decide, which stays on the
// stack for the whole round trip, holds only what the round trip needs.
//
//go:noinline
func (l *Limiter) request(buf *callBuf, key string, cost int64, dry bool, limits []Limit) (Request, error) {
	if cost < 0 {
		return Request{}, fmt.Errorf("%w: %d is negative", ErrInvalidCost, cost)
	}
	var req Request
	if err := l.layKeys(&req, key, limits, l.derives, buf.keys[:]); err != nil {
		return Request{}, err
	}
	ls := buf.limits[:0]
	if len(limits) > len(buf.limits) {
		ls = make([]Limit, 0, len(limits))
	}
	req.Limits, req.Cost, req.DryRun = append(ls, limits...), cost, dry
	return req, nil
}

// layKeys gives req the keys of key's limits: built in dst when it has
// room (keyBuilder.build), or, when derive is set (the strategy lays its
// keys out with Request.AppendKey), checked and left unbuilt.
func (l *Limiter) layKeys(req *Request, key string, limits []Limit, derive bool, dst []string) error {
	if derive {
		if err := l.keys.check(key, limits); err != nil {
			return err
		}
		req.prefix, req.tag = l.keys.prefix, hashTag(key)
		return nil
	}
	keys, err := l.keys.build(key, limits, dst)
	req.Keys = keys
	return err
}

// failed applies the fail mode to a call Redis could not decide; first is
// the call's first limit.
//
//go:noinline
func (l *Limiter) failed(err error, first Limit) (Result, error) {
	if errors.Is(err, ErrInvalidLimit) || errors.Is(err, ErrInvalidCost) {
		// A strategy's own bound on the input (checked before any I/O):
		// bad input is an error in every fail mode.
		return Result{}, err
	}
	if l.failMode != FailError && errors.Is(err, ErrContention) {
		// Redis answered and the key is hot: never an admission.
		return Result{Allowed: false, Degraded: true, Cause: err, Limit: first, RetryAfter: min(first.Period, time.Second)}, nil
	}
	switch l.failMode {
	case FailOpen:
		return Result{Allowed: true, Degraded: true, Cause: err, Limit: first}, nil
	case FailClosed:
		return Result{Allowed: false, Degraded: true, Cause: err, Limit: first, RetryAfter: min(first.Period, time.Second)}, nil
	}
	return Result{}, err
}

// callBuf is the per-call storage of a decision with up to two limits.
type callBuf struct {
	keys   [2]string
	limits [2]Limit
}

var callBufs = sync.Pool{New: func() any { return new(callBuf) }}

// release clears b, so the pool keeps no caller's data alive, and returns
// it to the pool.
func (b *callBuf) release() {
	*b = callBuf{}
	callBufs.Put(b)
}

func noCancel() {}

// withTimeout is kept out of line: see request.
//
//go:noinline
func (l *Limiter) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if l.timeout <= 0 {
		return ctx, noCancel
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= l.timeout {
		return ctx, noCancel
	}
	return context.WithTimeout(ctx, l.timeout)
}
