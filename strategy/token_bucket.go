package strategy

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

//go:embed lua/token_bucket.lua
var tokenBucketLua string

var tokenBucketScript = store.NewScript(tokenBucketLua)

// TokenBucketScript returns the script TokenBucket runs, for tools that
// preload it (SCRIPT LOAD) or benchmark it raw.
func TokenBucketScript() *store.Script { return tokenBucketScript }

// maxBucketUnits bounds Burst × Period in microseconds, the token bucket's
// largest scaled value, so that its integer arithmetic stays exact in
// Lua's numbers (below 2^53 with room for a refill).
const maxBucketUnits = 1 << 51

// TokenBucket is the token bucket: a bucket of Burst tokens (Rate when
// Burst is 0) that refills Rate tokens per Period, continuously; a request
// takes its cost in tokens or is denied. It admits as GCRA does, and keeps
// its tokens across a change of its rule (one string per limit).
//
// Guarantees:
//   - atomic: one Lua script, one round trip, all limits of a call decided
//     together; a request denied by any limit consumes nothing from any;
//   - exact: in any interval of length d, at most Burst + ⌊d·Rate/Period⌋
//     is admitted, however many callers contend;
//   - state, for a limit whose interval Period/Rate (the time one token
//     takes to come back) is whole milliseconds (10/s, 100/min: most
//     limits): the key's expiry is the time until the bucket is full
//     again, on the server's millisecond clock, so its PTTL is the tokens
//     missing times the interval; its value, "<bound, ms>/<rate>/<period
//     µs>/<burst>", names the bucket's scale as the limit's arguments give
//     it and bounds what the bucket lacks (read only when the key has lost
//     its TTL: such a bucket reads as lacking its bound, at most twice
//     what it lacked when the value was written); an admitted call on a
//     live bucket is a PTTL and a GETEX, which moves the expiry and returns
//     the value, checked after the fact (a value of another rule or none
//     gets its TTL back and is read again; a bound that no longer covers
//     what the bucket lacks is written again, twice that, at most full), a
//     PTTL and a SET on a new bucket, no TIME;
//   - state, for any other interval (3/s: a token every 333 333.3 µs), on
//     the same clock: "<9·10^15 + ms>:<units>:<period µs>", the tokens
//     when the bucket was written in units of 1/Period-in-µs of a token
//     (Rate units come back every µs) and the TTL the key had when it was
//     written, so that the TTL written less the PTTL is the time since, in
//     whole milliseconds, and the bucket exact to the unit; an admitted
//     call is a PTTL, a GET and a SET (a PTTL and a SET on a new key), no
//     TIME; the SET keeps the key's expiry (KEEPTTL) while that covers the
//     time until full, and else sets twice that time, at most the time to
//     fill from empty (a new bucket's is the time until full), so that a
//     subject who keeps asking moves its expiry rarely. Buckets of earlier
//     releases, "<last refill in µs on TIME>:<units>:<period µs>", are
//     read (with 2 ms less refill: TIME may run up to a millisecond ahead
//     of the expiry clock) and written back in this form; those releases
//     read this form as a bucket last refilled in 2255, with no refill
//     until it expires: during a rolling deploy they admit less, never
//     more (releases that wrote this form with the exact expiry read it
//     exactly);
//   - integers only: the arithmetic is exact and never drifts; Burst ×
//     Period (in µs) above 2^51 is limiter.ErrInvalidLimit, returned
//     before any I/O;
//   - a bucket written under another rule for the same key (another
//     period, rate or burst) keeps its tokens, rescaled and never rounded
//     up, capped at the new burst; a call that writes (admitted or denied)
//     stores it in the new rule's form and expiry;
//   - RetryAfter and ResetAfter are exact to the millisecond (rounded up);
//     a cost above Burst is never admitted (RetryAfter -1);
//   - a key that holds anything but a bucket is limiter.ErrCorruptCounter,
//     and the call writes nothing to any limit;
//   - expiry: a bucket of an interval of whole milliseconds expires when
//     it is full again (a full bucket is deleted); one of any other
//     interval at most twice the time until full after the write that set
//     its expiry, and never more than the time to fill from empty after
//     any write; a call that writes gives a bucket found without its
//     expiry, or with one shorter than the time until full or longer than
//     the time to fill from empty, its expiry back;
//   - time source: the Redis server's clock that keys expire by, in whole
//     milliseconds (TIME only to read an earlier release's bucket), never
//     the app server's;
//   - keys per decision: one per limit, in one Cluster slot;
//   - Redis 6.2 or later (GETEX), or a server that runs Lua,
//     such as miniredis, whose key expiry moves only when a test moves it.
type TokenBucket struct{}

// NewTokenBucket returns the TokenBucket strategy.
func NewTokenBucket() TokenBucket { return TokenBucket{} }

// Decide implements limiter.Strategy.
func (TokenBucket) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	return decideArgs(ctx, st, req, tokenBucketScript, "token bucket", tokenBucketArgs, bindByBurst)
}

// CheckLimit implements limiter.LimitChecker: a bucket holds at most 2^51
// units (its burst × its period in µs).
func (TokenBucket) CheckLimit(l limiter.Limit) error { return checkBucket(l) }

func checkBucket(l limiter.Limit) error {
	if burst := burstOf(l); burst > maxBucketUnits/l.Period.Microseconds() {
		return fmt.Errorf("%w: %s with burst %d: a token bucket holds at most 2^51 units (burst × period in µs)", limiter.ErrInvalidLimit, l, burst)
	}
	return nil
}

// tokenBucketArgs returns the script's arguments for req, {cost, peek,
// rate_1, period_µs_1, burst_1, ...}, or the limits' arguments alone for
// a cost of 1 that writes (argHead), with room for the reply after
// them.
func tokenBucketArgs(req limiter.Request) ([]int64, error) {
	n := len(req.Limits)
	h, head := argHead(req)
	args := make([]int64, head+3*n, head+3*n+1+3*n)
	copy(args, h[:head])
	for i, l := range req.Limits {
		if err := checkBucket(l); err != nil {
			return nil, err
		}
		args[head+3*i], args[head+1+3*i], args[head+2+3*i] = l.Rate, l.Period.Microseconds(), burstOf(l)
	}
	return args, nil
}
