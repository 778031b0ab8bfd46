package limiter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

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
// RetryAfter ends after ctx's deadline. It never sleeps past the deadline;
// when ctx ends during a sleep it returns the last denial and ctx's error.
// Errors of the decision itself (bad input, Redis failing under FailError)
// are returned as Allow returns them. Under FailClosed a Redis outage is a
// Degraded denial with a RetryAfter of up to a second: WaitN tries again
// after it (or halfway to ctx's deadline, when that is sooner) until Redis
// answers or ctx ends, and then returns the last denial and an error that
// wraps both ctx's error and the outage's (errors.Is finds either).
func (l *Limiter) WaitN(ctx context.Context, key string, n int64, limits ...Limit) (Result, error) {
	for {
		res, err := l.decide(ctx, key, n, false, limits)
		if err != nil || res.Allowed {
			return res, err
		}
		if res.RetryAfter < 0 {
			return res, fmt.Errorf("%w: cost %d, limit %s", ErrNeverAdmitted, n, res.Limit)
		}
		wait := max(res.RetryAfter, time.Millisecond)
		dl, ok := ctx.Deadline()
		left := time.Until(dl)
		switch {
		case res.Degraded:
			// Redis did not decide (FailClosed, a hot key's contention):
			// its RetryAfter is a pause, not a wait for quota. Try again
			// after it, or halfway to the deadline, while there is time.
			if ok && left < wait {
				if left < 2*time.Millisecond {
					return res, fmt.Errorf("limiter: wait: %w; the last try: %w", context.DeadlineExceeded, res.Cause)
				}
				wait = left / 2
			}
		case ok && left < wait:
			return res, fmt.Errorf("%w: retry after %s, deadline in %s", ErrWaitTooLong, res.RetryAfter, left.Round(time.Millisecond))
		case ok:
			wait += rand.N(min(maxJitter, left-wait) + 1)
		default:
			wait += rand.N(maxJitter + 1)
		}
		if err := l.sleepFor(ctx, wait); err != nil {
			if res.Degraded {
				return res, fmt.Errorf("limiter: wait: %w; the last try: %w", err, res.Cause)
			}
			return res, err
		}
	}
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
