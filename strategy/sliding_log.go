package strategy

import (
	"context"
	_ "embed"
	"fmt"
	"math/rand/v2"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

//go:embed lua/sliding_log.lua
var slidingLogLua string

var slidingLogScript = store.NewScript(slidingLogLua)

// SlidingLogScript returns the script SlidingLog runs, for tools that
// preload it (SCRIPT LOAD) or benchmark it raw.
func SlidingLogScript() *store.Script { return slidingLogScript }

// SlidingLogMaxRate is the largest Rate SlidingLog accepts: its log holds
// one sorted-set member per unit admitted in the last window.
const SlidingLogMaxRate = 10_000

// SlidingLog keeps a log of the units admitted in the last Period (a
// sorted set per limit, one member per unit of cost, scored by the
// server's time) and admits when the units of the last Period plus the
// cost fit Rate: the exact sliding window.
//
// Guarantees:
//   - atomic: one Lua script, one round trip, all limits of a call decided
//     together; a request denied by any limit consumes nothing from any;
//   - exact: in any interval one Period long at most Rate is admitted, at
//     any instant and under any contention (no boundary bursts); units of
//     one instant are distinct members, never merged;
//   - RetryAfter is the time until enough of the oldest units have left
//     the window; ResetAfter the time until the log is empty; both exact
//     to the millisecond (rounded up);
//   - a key that is not a sorted set is limiter.ErrCorruptCounter, and the
//     call writes nothing to any limit;
//   - memory and time grow with Rate (a member per unit, ~60 bytes; a cost
//     of n adds n members): a limit above SlidingLogMaxRate is
//     limiter.ErrInvalidLimit, returned before any I/O;
//   - expiry: a writing call trims the units that left the window and
//     leaves the log expiring one Period after its newest unit; a denied
//     call gives a log found without that expiry its expiry back;
//   - time source: the Redis server's TIME, never the app server's clock;
//   - keys per decision: one per limit, in one Cluster slot;
//   - Redis 5.0 or later (or a server that runs Lua, such as miniredis).
type SlidingLog struct{}

// NewSlidingLog returns the SlidingLog strategy.
func NewSlidingLog() SlidingLog { return SlidingLog{} }

// Decide implements limiter.Strategy.
func (SlidingLog) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	return decideArgs(ctx, st, req, slidingLogScript, "sliding log", slidingLogArgs, bindAll)
}

// CheckLimit implements limiter.LimitChecker: a log holds at most
// SlidingLogMaxRate per window.
func (SlidingLog) CheckLimit(l limiter.Limit) error {
	if l.Rate > SlidingLogMaxRate {
		return fmt.Errorf("%w: %s: a sliding log holds at most %d per window", limiter.ErrInvalidLimit, l, SlidingLogMaxRate)
	}
	return nil
}

// slidingLogArgs returns the script's arguments for req, {cost, peek,
// nonce, rate_1, window_ms_1, ...}, with room for the reply after them.
func slidingLogArgs(req limiter.Request) ([]int64, error) {
	n := len(req.Limits)
	args := make([]int64, 3+2*n, 3+2*n+1+3*n)
	args[0], args[1], args[2] = req.Cost, 0, rand.Int64()
	if req.DryRun {
		args[1] = 1
	}
	for i, l := range req.Limits {
		if err := (SlidingLog{}).CheckLimit(l); err != nil {
			return nil, err
		}
		args[3+2*i], args[4+2*i] = l.Rate, l.Period.Milliseconds()
	}
	return args, nil
}
