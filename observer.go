package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quotagate/limiter/store"
)

// Observer is told about every call of Allow, AllowN and Peek, every
// answer of AllowMany and every try of Wait and WaitN, so that users can
// count decisions and alert on backend errors. Reset is not observed.
//
// For each call:
//
//   - OnDecision is called exactly once when the call returns a Result with a
//     nil error, Degraded ones (made by the fail mode) included;
//   - OnError is called exactly once when the call met an error: bad input
//     (the error returned), or a backend that could not decide, whether the
//     error is returned (FailError) or carried in a Degraded Result's Cause
//     (FailOpen, FailClosed), or work after a decision that Redis made
//     (taking back a denied request's count), carried in the Cause of a
//     Result that is not Degraded. OnError is called before OnDecision.
//
// So a healthy call fires OnDecision only, a call that returned an error
// fires OnError only, and a Degraded decision, or one with a Cause, fires
// both. A try of Wait is told as Wait reports it: one that failed because
// the caller's context ended (a FailOpen admission, a FailClosed denial)
// is that context's error, never a decision, and a denial after which no
// wait can help fires OnError with ErrNeverAdmitted or ErrWaitTooLong,
// then OnDecision with the denial. The methods run
// synchronously on the caller's goroutine with the caller's context and key
// (the subject, not the Redis key); they must be safe for concurrent use and
// fast.
type Observer interface {
	// OnDecision is told the Result of a call that returned one.
	OnDecision(ctx context.Context, key string, r Result)
	// OnError is told the error a call met.
	OnError(ctx context.Context, key string, err error)
}

// CallObserver is an Observer that is also told each call's outcome and
// how long it took, once per call of Allow, AllowN and Peek (per answer of
// AllowMany, per try of Wait and WaitN), after
// OnDecision or OnError: r and err are what the call returns (bad input
// included). Latency histograms and tracing spans are built on it.
type CallObserver interface {
	// OnCall is told a call's Result or error and its duration.
	OnCall(ctx context.Context, key string, r Result, err error, took time.Duration)
}

// ErrorKind names the kind of an error a call met, for metrics and logs:
//
//	"invalid_input"    ErrInvalidKey, ErrInvalidLimit, ErrInvalidCost
//	"contention"       ErrContention (an optimistic strategy gave up)
//	"corrupt_counter"  ErrCorruptCounter
//	"unknown_outcome"  store.ErrUnknownOutcome (the request was sent and its
//	                   reply lost or late: it may have been counted)
//	"timeout"          context.DeadlineExceeded, nothing sent or counted
//	"canceled"         context.Canceled
//	"wait"             ErrNeverAdmitted, ErrWaitTooLong (Wait had no wait
//	                   that could help: Redis answered)
//	"try_again"        store.ErrTryAgain (a Cluster slot's migration split
//	                   the call's keys for longer than the call could
//	                   wait: nothing ran)
//	"backend"          anything else: Redis unreachable, refusing (OOM,
//	                   NOPERM, BUSY) or failing
//
// and "" for nil.
func ErrorKind(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrInvalidKey), errors.Is(err, ErrInvalidLimit), errors.Is(err, ErrInvalidCost):
		return "invalid_input"
	case errors.Is(err, ErrContention):
		return "contention"
	case errors.Is(err, ErrCorruptCounter):
		return "corrupt_counter"
	case errors.Is(err, store.ErrUnknownOutcome):
		return "unknown_outcome"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, ErrNeverAdmitted), errors.Is(err, ErrWaitTooLong):
		return "wait"
	case errors.Is(err, store.ErrTryAgain):
		return "try_again"
	}
	return "backend"
}

// ObserverFuncs is an Observer made of funcs; a nil func is not called.
type ObserverFuncs struct {
	// Decision is called as Observer.OnDecision.
	Decision func(ctx context.Context, key string, r Result)
	// Error is called as Observer.OnError.
	Error func(ctx context.Context, key string, err error)
}

// OnDecision implements Observer.
func (o ObserverFuncs) OnDecision(ctx context.Context, key string, r Result) {
	if o.Decision != nil {
		o.Decision(ctx, key, r)
	}
}

// OnError implements Observer.
func (o ObserverFuncs) OnError(ctx context.Context, key string, err error) {
	if o.Error != nil {
		o.Error(ctx, key, err)
	}
}

// WithObserver adds an observer of every call (see Observer). Given several
// times, every observer is told, in the order given. A nil observer is
// ErrInvalidOption.
func WithObserver(o Observer) Option {
	return func(l *Limiter) error {
		if isNil(o) {
			return errNilObserver
		}
		if prev, ok := l.obs.(observers); ok {
			l.obs = append(observers{}, append(prev, o)...)
		} else if l.obs != nil {
			l.obs = observers{l.obs, o}
		} else {
			l.obs = o
		}
		return nil
	}
}

var errNilObserver = fmt.Errorf("%w: nil observer", ErrInvalidOption)

// observers fans one call out to several observers.
type observers []Observer

func (os observers) OnDecision(ctx context.Context, key string, r Result) {
	for _, o := range os {
		o.OnDecision(ctx, key, r)
	}
}

func (os observers) OnError(ctx context.Context, key string, err error) {
	for _, o := range os {
		o.OnError(ctx, key, err)
	}
}

func (os observers) OnCall(ctx context.Context, key string, r Result, err error, took time.Duration) {
	for _, o := range os {
		if co, ok := o.(CallObserver); ok {
			co.OnCall(ctx, key, r, err, took)
		}
	}
}

// observe tells l's observer about one call's outcome: its error, or its
// Result (after its Cause, when Degraded).
// observeCall tells l's observer one call's outcome (observe), then, for
// a CallObserver, the call and how long it took.
func (l *Limiter) observeCall(ctx context.Context, key string, r Result, err error, took time.Duration) {
	l.observe(ctx, key, r, err)
	if co, ok := l.obs.(CallObserver); ok {
		co.OnCall(ctx, key, r, err, took)
	}
}

func (l *Limiter) observe(ctx context.Context, key string, r Result, err error) {
	if err != nil {
		l.obs.OnError(ctx, key, err)
		return
	}
	if r.Degraded || r.Cause != nil {
		l.obs.OnError(ctx, key, r.Cause)
	}
	l.obs.OnDecision(ctx, key, r)
}

// Prefix returns the key prefix of l's counters (see WithPrefix).
func (l *Limiter) Prefix() string { return l.keys.prefix }

// With returns a copy of l with opts applied on top of l's configuration:
// the copy shares l's store, strategy and observers (more can be added), so
// it decides on the same counters unless WithPrefix changes the prefix.
// A deny cache or quota leases of the copy's own (WithDenyCache,
// WithQuotaLease) are forgotten by a Reset through l or any copy, as l's
// own are. Use it for a per-caller variation such as another fail mode or timeout:
//
//	strict, err := lim.With(limiter.WithFailMode(limiter.FailClosed))
//
// l is not changed. With is cheap but not free: derive once, not per call.
func (l *Limiter) With(opts ...Option) (*Limiter, error) {
	c := *l
	if err := c.apply(l, opts); err != nil {
		return nil, err
	}
	return &c, nil
}
