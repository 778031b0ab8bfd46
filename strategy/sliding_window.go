package strategy

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

//go:embed lua/sliding_window.lua
var slidingWindowLua string

var slidingWindowScript = store.NewScript(slidingWindowLua)

// SlidingWindowScript returns the script SlidingWindow runs, for tools that
// preload it (SCRIPT LOAD) or benchmark it raw.
func SlidingWindowScript() *store.Script { return slidingWindowScript }

// maxWindowUnits bounds Rate × Period in milliseconds, the sliding window
// counter's largest product, so that its integer arithmetic stays exact in
// Lua's numbers (below 2^53 with room for a sum of three).
const maxWindowUnits = 1 << 51

// maxWindowRate bounds a sliding window's Rate: its state packs two counts
// of up to 2^26 − 1 into one integer below 2^53, which INCRBY updates.
const maxWindowRate = 1<<26 - 1

// SlidingWindow is the sliding window counter: two fixed-window counts,
// the current window's and the previous one's, the previous weighted by
// the part of it that the last Period still covers. At e into a window of
// length P a request of cost n is admitted when
//
//	count + n + previous·(P−e)/P ≤ Rate.
//
// It smooths a fixed window's boundary burst in O(1) memory per limit, on
// the assumption that the previous window's requests were spread evenly;
// when they were not, it may admit more than Rate in a Period-long
// interval that straddles two windows (up to 2·Rate in the worst case, as
// a fixed window), never more than Rate within one window.
//
// Guarantees:
//   - atomic: one Lua script, one round trip, all limits of a call decided
//     together; a request denied by any limit consumes nothing from any;
//   - exact to its formula: compared in integers, however many callers
//     contend; in any interval of length d at most (⌈d/Period⌉+1)·Rate is
//     admitted, and at most Rate within one window;
//   - windows start with the first request of an idle limit and follow
//     each other every Period; quota comes back gradually as the previous
//     window's weight falls, never all at once;
//   - RetryAfter and ResetAfter are exact to the millisecond (rounded up):
//     a denied request retried after RetryAfter fits, unless others took
//     the quota first; a cost above Rate is never admitted (RetryAfter -1);
//   - state: one string key per limit holding one integer,
//     previous·2^27 + count, and the key's expiry, the end of the window
//     after the current one (the end of the current one while it counts
//     nothing), which is the clock: a decision is FixedWindow's INCR and
//     PTTL, with one more call when a window starts; the key expires when
//     the weighted count is zero, at most two Periods after its last
//     write; a writing call gives a key found without that expiry (or with
//     a longer one) its expiry back, its window starting then;
//   - a key that holds anything else is limiter.ErrCorruptCounter, and the
//     call writes nothing to any limit;
//   - a Rate above 2^26 − 1 (67 108 863) or Rate × Period (in ms) above
//     2^51 is limiter.ErrInvalidLimit, returned before any I/O; Burst is
//     ignored;
//   - time source: the Redis server's clock, as key expiry, never the app
//     server's clock;
//   - keys per decision: one per limit, in one Cluster slot;
//   - Redis 5.0 or later (or a server that runs Lua, such as miniredis).
type SlidingWindow struct{}

// NewSlidingWindow returns the SlidingWindow strategy.
func NewSlidingWindow() SlidingWindow { return SlidingWindow{} }

// Decide implements limiter.Strategy.
func (SlidingWindow) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	return decideInts(ctx, st, req, slidingWindowScript, "sliding window", slidingWindowParams, bindByRate)
}

// CheckLimit implements limiter.LimitChecker: Rate is at most 2^26 − 1
// and Rate × Period in milliseconds at most 2^51.
func (SlidingWindow) CheckLimit(l limiter.Limit) error {
	_, _, err := slidingWindowParams(l)
	return err
}

// slidingWindowParams returns l's rate and period in milliseconds, or
// limiter.ErrInvalidLimit when the rate is too large for its state or
// their product too large to be exact.
func slidingWindowParams(l limiter.Limit) (rate, period int64, err error) {
	ms := l.Period.Milliseconds()
	if l.Rate > maxWindowRate {
		return 0, 0, fmt.Errorf("%w: %s: a sliding window counter counts at most 2^26 - 1 per period", limiter.ErrInvalidLimit, l)
	}
	if l.Rate > maxWindowUnits/ms {
		return 0, 0, fmt.Errorf("%w: %s: a sliding window counter holds at most 2^51 units (rate × period in ms)", limiter.ErrInvalidLimit, l)
	}
	return l.Rate, ms, nil
}
