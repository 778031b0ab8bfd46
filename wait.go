package limiter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/quotagate/limiter/internal/ctxend"
)

// maxOutagePause is the longest pause WaitN makes between tries that
// Redis does not decide (FailClosed, contention): the pause a Degraded
// denial gives doubles up to it.
const maxOutagePause = time.Second

// maxSleep bounds one sleep of WaitN: a strategy of the caller's own may
// give any RetryAfter, and the jitter added to one near the largest
// Duration would overflow into a negative sleep, retried at once, in a
// loop.
const maxSleep = 100 * 365 * 24 * time.Hour

// maxJitter bounds the random time Wait adds to each sleep, so that
// waiters denied together do not all retry at the same instant.
const maxJitter = time.Millisecond

// Wait is WaitN with a cost of 1.
func (l *Limiter) Wait(ctx context.Context, key string, limits ...Limit) (Result, error) {
	return l.WaitN(ctx, key, 1, limits...)
}

// WaitN blocks until n is admitted for key by every limit, or ctx ends. A
// denied try sleeps for the denial's RetryAfter, plus a random jitter of at
// most a millisecond, then tries again; others may take the quota first,
// so a wait can take several tries.
//
// WaitN returns at once, with the denial and an error, when no wait can
// help: ErrNeverAdmitted when n exceeds a limit, ErrWaitTooLong when the
// RetryAfter ends after ctx's deadline. It never sleeps past the deadline,
// and it ends the jitter early enough to leave time for the next try. When
// ctx ends (before a try, during a sleep, or during a try, which then
// fails) it returns the last denial (a zero Result when there was none) and
// ctx's error: a try that failed because ctx ended is never a FailOpen
// admission, since Redis was not down, the caller stopped waiting. Errors
// of the decision itself (bad input, Redis failing under FailError) are
// returned as Allow returns them. Under FailClosed a Redis outage is a
// Degraded denial with a RetryAfter of up to a second: WaitN tries again
// after it, the pause doubled at each further try Redis does not decide up
// to a second (or halfway to ctx's deadline, when that is sooner), with a
// jitter, until Redis answers or ctx ends, and then returns the last
// denial and an error that wraps both ctx's error and the outage's
// (errors.Is finds either).
func (l *Limiter) WaitN(ctx context.Context, key string, n int64, limits ...Limit) (Result, error) {
	// The tries are made by a copy of l without the observer, which is
	// told each try as WaitN reports it (see Observer).
	d := l
	if l.obs != nil {
		c := *l
		c.obs = nil
		d = &c
	}
	var last Result // the last denial
	undecided := 0  // tries in a row Redis did not decide
	for {
		if err := ctx.Err(); err != nil {
			if last.Degraded {
				return last, waitEnded(err, last.Cause)
			}
			return last, err
		}
		start := time.Now()
		res, err := d.decide(ctx, key, n, false, limits)
		took := time.Since(start)
		// (ctx's deadline passed counts as its end: a store may fail
		// the call then by a timer of its own, a socket's read deadline,
		// a moment before ctx's timer ends ctx)
		if cerr := ctxend.Err(ctx); cerr != nil && (err != nil || res.Degraded) {
			// The try failed because ctx ended: its FailOpen admission or
			// FailClosed denial says no more than that, so ctx's end
			// decides, with the denial before it.
			cause := err
			if cause == nil {
				cause = res.Cause
			}
			werr := waitEnded(cerr, cause)
			l.observeTry(ctx, key, Result{}, werr, nil, took)
			return last, werr
		}
		if err != nil || res.Allowed {
			l.observeTry(ctx, key, res, err, nil, took)
			return res, err
		}
		last = res
		if !res.Degraded {
			undecided = 0
		}
		if res.RetryAfter < 0 {
			werr := fmt.Errorf("%w: cost %d, limit %s", ErrNeverAdmitted, n, res.Limit)
			l.observeTry(ctx, key, res, nil, werr, took)
			return res, werr
		}
		wait := min(max(res.RetryAfter, time.Millisecond), maxSleep)
		dl, ok := ctx.Deadline()
		left := time.Until(dl)
		switch {
		case res.Degraded:
			// Redis did not decide (FailClosed, a hot key's contention):
			// its RetryAfter is a pause, not a wait for quota. Try again
			// after it, doubled at each try in a row Redis does not decide
			// up to a second (a short limit's pause would have every
			// waiter retry a recovering Redis a thousand times a second),
			// or halfway to the deadline, while there is time.
			if wait < maxOutagePause {
				wait = min(wait<<min(undecided, 10), maxOutagePause)
			}
			wait += jitter(wait, left, ok)
			undecided++
			if ok && left < wait {
				if left < 2*time.Millisecond {
					werr := waitEnded(context.DeadlineExceeded, res.Cause)
					l.observeTry(ctx, key, res, nil, werr, took)
					return res, werr
				}
				wait = left / 2
			}
		case ok && left < wait:
			werr := fmt.Errorf("%w: retry after %s, deadline in %s", ErrWaitTooLong, res.RetryAfter, left.Round(time.Millisecond))
			l.observeTry(ctx, key, res, nil, werr, took)
			return res, werr
		default:
			wait += jitter(wait, left, ok)
		}
		l.observeTry(ctx, key, res, nil, nil, took)
		if err := l.sleepFor(ctx, wait); err != nil {
			if res.Degraded {
				return res, waitEnded(err, res.Cause)
			}
			return res, err
		}
	}
}

// observeTry tells l's observer one try of WaitN as WaitN reports it: r
// and err, the try's outcome (a try that failed because ctx ended: ctx's
// end, no Result), and waitErr, the error that ends the wait after the
// try's denial (ErrNeverAdmitted, ErrWaitTooLong), told before it.
func (l *Limiter) observeTry(ctx context.Context, key string, r Result, err, waitErr error, took time.Duration) {
	if l.obs == nil {
		return
	}
	if waitErr == nil {
		l.observeCall(ctx, key, r, err, took)
		return
	}
	l.obs.OnError(ctx, key, waitErr)
	l.observe(ctx, key, r, err)
	if co, ok := l.obs.(CallObserver); ok {
		co.OnCall(ctx, key, r, waitErr, took)
	}
}

// waitEnded is the error of a wait that ended (ctx's error, or the
// sleep's) after a try that failed on cause: errors.Is finds either.
func waitEnded(end, cause error) error {
	return fmt.Errorf("limiter: wait: %w; the last try: %w", end, cause)
}

// jitter returns the random time added to a sleep of wait: at most
// maxJitter and, with a deadline (ok) left away, at most half of what the
// sleep leaves before it, so that the next try has the rest to reach Redis.
func jitter(wait, left time.Duration, ok bool) time.Duration {
	j := maxJitter
	if ok {
		j = max(min(j, (left-wait)/2), 0)
	}
	return rand.N(j + 1)
}

// sleepFor sleeps for d with the Limiter's sleep function.
func (l *Limiter) sleepFor(ctx context.Context, d time.Duration) error {
	if l.sleep != nil {
		return l.sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WithSleep replaces how Wait sleeps between tries (a timer, ending early
// with ctx's error when ctx ends). It is for tests on a virtual clock: a
// sleep that moves the test server's clock forward by d makes Wait's
// retries immediate. sleep returns a non-nil error to end the wait.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(l *Limiter) error {
		if sleep == nil {
			return fmt.Errorf("%w: nil sleep function", ErrInvalidOption)
		}
		l.sleep = sleep
		return nil
	}
}
