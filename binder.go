package limiter

import "time"

// Binder builds a Result from the state of each limit after a decision, so
// every strategy picks the binding limit the same way. The zero value is
// ready to use.
type Binder struct {
	low, deny       bound
	lowSet, denySet bool
}

// bound is the state of one limit after a decision.
type bound struct {
	i          int
	remaining  int64
	resetAfter time.Duration
	retryAfter time.Duration
}

// Add records limit i's state after the decision: the cost remaining in it,
// the time until it is full again, and retryAfter: 0 when this limit admits
// the request, the wait until it would when it denies, -1 when it never
// will (the cost exceeds the limit).
func (b *Binder) Add(i int, remaining int64, resetAfter, retryAfter time.Duration) {
	s := bound{i, remaining, resetAfter, retryAfter}
	if !b.lowSet || remaining < b.low.remaining || remaining == b.low.remaining && resetAfter > b.low.resetAfter {
		b.low, b.lowSet = s, true
	}
	if retryAfter != 0 {
		cur := b.deny.retryAfter
		if !b.denySet || (cur != -1 && (retryAfter == -1 || retryAfter > cur)) {
			b.deny, b.denySet = s, true
		}
	}
}

// Result returns the decision: when allowed, the binding limit is the one
// with the least remaining (of limits with as little, the one furthest from
// full again: with 1/s and 1/day both used up, the day's, which is what a
// client must wait for); when denied, the one that denied with the longest
// wait (never, first).
func (b *Binder) Result(allowed bool) Result {
	s := b.low
	if !allowed && b.denySet {
		s = b.deny
	}
	r := Result{Allowed: allowed, Remaining: max(s.remaining, 0), ResetAfter: s.resetAfter, Index: s.i}
	if !allowed {
		r.RetryAfter = s.retryAfter
	}
	return r
}
