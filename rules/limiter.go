package rules

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/quotagate/limiter"
)

// DefaultInterval is how often Watch reloads the rules unless
// WithInterval says otherwise.
const DefaultInterval = 5 * time.Second

// Decision is the outcome of one request under a rule set.
type Decision struct {
	// Result is the limiter's decision. Result.Limit is the binding rule
	// (RuleName names it): for a denied request the rule that refused it.
	limiter.Result
	// Subject is the subject decided.
	Subject string
	// Rules are the rules the decision applied, in the set's order; empty
	// when the Default allowed or denied the subject without limits. The
	// slice is shared with the rule set: do not modify it.
	Rules []limiter.Limit
	// Default reports a subject without rules of its own, decided by the
	// set's Default.
	Default bool
}

// Limiter decides requests under a rule set that it reloads from its
// Source without touching any counter. It is safe for concurrent use.
//
// All the rules of a subject are decided in one call of the underlying
// limiter.Limiter: one atomic, all-or-nothing decision (a request refused
// by the per-second rule consumes nothing from the daily one). A reload
// swaps the rules in memory and writes nothing to Redis, so the counters of
// unchanged rules keep counting, and a rule whose rate changes keeps its
// current window's count (counters are named after the rule's Name).
//
// The fail mode is the limiter.Limiter's unless the set has a FailMode: the
// set's decisions then go through a copy of it made with
// limiter.Limiter.With, which shares its store, strategy and observers.
// Decisions the Default makes alone (Deny, Allow) do not reach the
// limiter.Limiter, so its Observer does not see them; Decision.Default
// tells them apart.
type Limiter struct {
	lim      *limiter.Limiter
	src      Source
	interval time.Duration
	onReload func(error)

	// loading holds a token while a load runs: loads run one at a time,
	// so an older load never replaces a newer one, and a caller waiting
	// for its turn gives up when its context ends
	loading chan struct{}
	state   atomic.Pointer[state]
	lastErr atomic.Pointer[error]
}

// state is one rule set in force and the limiter that decides it (lim, or
// a copy of it with the set's fail mode).
type state struct {
	set *Set
	lim *limiter.Limiter
}

// Option configures a Limiter.
type Option func(*Limiter) error

// WithInterval sets how often Watch reloads the rules (default
// DefaultInterval): a change to the source takes effect within this
// interval, plus the time of one load.
func WithInterval(d time.Duration) Option {
	return func(l *Limiter) error {
		if d <= 0 {
			return fmt.Errorf("%w: interval %s must be positive", limiter.ErrInvalidOption, d)
		}
		l.interval = d
		return nil
	}
}

// WithReloadHook sets f to be told of Watch's reloads: f(nil) when a new
// rule set took effect, f(err) when a load failed and the last good rules
// stay in force. A failure that repeats with the same message is reported
// once, until a load succeeds or fails differently. f runs on Watch's
// goroutine.
func WithReloadHook(f func(err error)) Option {
	return func(l *Limiter) error {
		l.onReload = f
		return nil
	}
}

// New returns a Limiter deciding with lim under the rules from src, which
// it loads once now: an error (the source's, or a *ConfigError) means there
// are no good rules to start with.
func New(ctx context.Context, lim *limiter.Limiter, src Source, opts ...Option) (*Limiter, error) {
	if lim == nil {
		return nil, fmt.Errorf("rules: %w: nil limiter", limiter.ErrInvalidOption)
	}
	if src == nil {
		return nil, fmt.Errorf("rules: %w: nil source", limiter.ErrInvalidOption)
	}
	l := &Limiter{lim: lim, src: src, interval: DefaultInterval, loading: make(chan struct{}, 1)}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("rules: %w: nil option", limiter.ErrInvalidOption)
		}
		if err := o(l); err != nil {
			return nil, err
		}
	}
	if _, err := l.Reload(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// Set returns the rule set in force. It must not be modified.
func (l *Limiter) Set() *Set { return l.state.Load().set }

// Rules returns the rules that apply to subject and whether they are its
// own (false: the Default's).
func (l *Limiter) Rules(subject string) ([]limiter.Limit, bool) {
	return l.state.Load().set.lookup(subject)
}

// Allow decides one request of subject under its rules.
func (l *Limiter) Allow(ctx context.Context, subject string) (Decision, error) {
	return l.decide(ctx, subject, 1, false)
}

// AllowN decides a request of cost n of subject under its rules; n == 0
// reads the state without writing.
func (l *Limiter) AllowN(ctx context.Context, subject string, n int64) (Decision, error) {
	return l.decide(ctx, subject, n, false)
}

// Peek reports whether a request of cost 1 of subject would be admitted
// now, without consuming anything.
func (l *Limiter) Peek(ctx context.Context, subject string) (Decision, error) {
	return l.decide(ctx, subject, 1, true)
}

// AllowFor decides one request of subject under the rules of rule: the
// rules are looked up by rule and counted under subject. It applies a
// route's rules to each client: rule "POST /login", subject the route and
// the client's address joined, so that every client has its own counters
// of the route's rules. Decision.Default reports that rule has no rules of
// its own.
func (l *Limiter) AllowFor(ctx context.Context, rule, subject string) (Decision, error) {
	return l.decideFor(ctx, rule, subject, 1, false)
}

func (l *Limiter) decide(ctx context.Context, subject string, n int64, peek bool) (Decision, error) {
	return l.decideFor(ctx, subject, subject, n, peek)
}

// decideFor decides a request of subject under the rules of rule.
func (l *Limiter) decideFor(ctx context.Context, rule, subject string, n int64, peek bool) (Decision, error) {
	st := l.state.Load()
	limits, own := st.set.lookup(rule)
	d := Decision{Subject: subject, Default: !own}
	if !own && st.set.Default.Action != Limit {
		// Decided by configuration alone: no counter, no Redis call.
		switch {
		case subject == "":
			return d, fmt.Errorf("rules: %w: empty subject", limiter.ErrInvalidKey)
		case n < 0:
			return d, fmt.Errorf("rules: %w: %d is negative", limiter.ErrInvalidCost, n)
		}
		d.Allowed = st.set.Default.Action == Allow
		if !d.Allowed {
			d.RetryAfter = -1
		}
		return d, nil
	}
	d.Rules = limits
	var err error
	if peek {
		d.Result, err = st.lim.Peek(ctx, subject, limits...)
	} else {
		d.Result, err = st.lim.AllowN(ctx, subject, n, limits...)
	}
	return d, err
}

// Reload loads the rules from the source now and puts them in force when
// they differ from the current ones; changed reports whether they did. On
// error the rules in force stay, and LastError returns the error until a
// load succeeds. Call it when you learn of a change (a pub/sub message, an
// admin request); Watch calls it periodically.
//
// Loads run one at a time. A Reload called while another load runs waits
// for it, or until ctx is done: it then returns ctx's error, and leaves
// the rules in force and LastError as they were (it loaded nothing).
func (l *Limiter) Reload(ctx context.Context) (changed bool, err error) {
	select {
	case l.loading <- struct{}{}:
	default:
		select {
		case l.loading <- struct{}{}:
		case <-ctx.Done():
			return false, fmt.Errorf("%w: %w", errWaiting, ctx.Err())
		}
	}
	defer func() { <-l.loading }()
	set, err := l.src.Load(ctx)
	if err == nil && set == nil {
		err = &ConfigError{Err: errors.New("the source returned no set")}
	}
	if err == nil {
		err = set.ValidateFor(l.lim)
	}
	if err != nil {
		l.lastErr.Store(&err)
		return false, err
	}
	l.lastErr.Store(nil)
	cur := l.state.Load()
	if cur != nil && cur.set.equal(set) {
		return false, nil
	}
	next := &state{set: set, lim: l.lim}
	if set.FailMode != nil {
		if next.lim, err = l.lim.With(limiter.WithFailMode(*set.FailMode)); err != nil {
			err = &ConfigError{Field: "fail_mode", Err: err}
			l.lastErr.Store(&err)
			return false, err
		}
	}
	l.state.Store(next)
	return true, nil
}

// errWaiting is the error of a Reload whose context ended while another
// load ran: it loaded nothing.
var errWaiting = errors.New("rules: reload: waiting for another load")

// LastError returns the error of the last load, or nil when it succeeded.
func (l *Limiter) LastError() error {
	if p := l.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Watch reloads the rules every interval (WithInterval) until ctx is done,
// then returns ctx's error. Each load is bounded by the interval (at least
// one second). Run it on a goroutine of its own:
//
//	go rl.Watch(ctx)
//
// A load that fails keeps the rules in force and is reported to the reload
// hook (WithReloadHook), as is every change that took effect. A tick that
// finds another load running (a Reload of yours) waits for it within the
// same bound, and is skipped if it still runs then: nothing was loaded, so
// nothing is reported (that load's outcome is its caller's).
func (l *Limiter) Watch(ctx context.Context) error {
	t := time.NewTicker(l.interval)
	defer t.Stop()
	var reported string // the failure last reported, "" after a success
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		lctx, cancel := context.WithTimeout(ctx, max(l.interval, time.Second))
		changed, err := l.Reload(lctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch {
		case errors.Is(err, errWaiting):
			// another load ran throughout: this tick loaded nothing
		case err != nil:
			if err.Error() != reported {
				reported = err.Error()
				l.report(err)
			}
		case changed || reported != "":
			reported = ""
			l.report(nil)
		}
	}
}

func (l *Limiter) report(err error) {
	if l.onReload != nil {
		l.onReload(err)
	}
}
