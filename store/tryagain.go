package store

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// The pauses between sends of a call refused with ErrTryAgain: the first
// is tryAgainFirst, each next one twice as long up to tryAgainMax, each
// shortened by a random part of up to a quarter (callers refused together
// do not all come back at once).
const (
	tryAgainFirst = 5 * time.Millisecond
	tryAgainMax   = 100 * time.Millisecond
	// tryAgainTries bounds the sends of a call whose context has no
	// deadline: about a second of pauses.
	tryAgainTries = 15
)

// TryAgainPause waits before a call refused with ErrTryAgain is sent again,
// for the try-th time (1 for the first re-send), and reports whether to send
// it. It reports false at once, without waiting, when the pause would end
// after ctx's deadline, or, for a ctx without a deadline, after about a
// second of pauses in all; and false when ctx ends during the pause. The
// refused call ran nothing, so the caller may send it again, and should
// return the ErrTryAgain error when TryAgainPause reports false.
func TryAgainPause(ctx context.Context, try int) bool {
	d := tryAgainFirst << min(max(try-1, 0), 5)
	d = min(d, tryAgainMax)
	d -= rand.N(d/4 + 1)
	if dl, ok := ctx.Deadline(); ok {
		if time.Until(dl) <= d {
			return false
		}
	} else if try >= tryAgainTries {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// DoAgain sends the single command cmd on st and returns its reply. A
// Cluster's TRYAGAIN (ErrTryAgain, as the call's error or as the reply's:
// cmd's keys are split by a slot migration, and it ran nothing) is answered
// by sending cmd again after TryAgainPause, while it allows; then the
// ErrTryAgain is returned as it came. Any other outcome is st.Do's.
func DoAgain(ctx context.Context, st Store, cmd Cmd) (Reply, error) {
	for try := 1; ; try++ {
		rs, err := st.Do(ctx, cmd)
		var r Reply
		if err == nil {
			r = rs[0]
		}
		if !errors.Is(err, ErrTryAgain) && !errors.Is(r.Err, ErrTryAgain) {
			return r, err
		}
		if !TryAgainPause(ctx, try) {
			return r, err
		}
	}
}
