package strategy

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

//go:embed lua/gcra.lua
var gcraLua string

var gcraScript = store.NewScript(gcraLua)

// GCRAScript returns the script GCRA runs, for tools that preload it
// (SCRIPT LOAD) or benchmark it raw.
func GCRAScript() *store.Script { return gcraScript }

// MaxRefill is the longest time GCRA may take to refill a whole burst
// (Burst × Period / Rate): 100 years, which keeps its arithmetic on whole
// microseconds exact.
const MaxRefill = 100 * 365 * 24 * time.Hour

// GCRA is the generic cell rate algorithm: a limit of Rate per Period
// admits one unit of cost every Period/Rate (the emission interval) on
// average, and up to Burst at once (Rate when Burst is 0). Quota comes back
// smoothly, one unit per emission interval, instead of all at once at a
// window's end.
//
// Guarantees:
//   - atomic: one Lua script, one round trip, all limits of a call decided
//     together; a request denied by any limit consumes nothing from any;
//   - exact on the server's clock: in any interval of length d by that
//     clock, at most Burst + ⌊d·Rate/Period⌋ is admitted, however many
//     callers contend (no boundary bursts). Limits are decided on the
//     clock Redis expires keys by, read in whole milliseconds (the
//     theoretical arrival time itself is kept to the microsecond);
//   - RetryAfter and ResetAfter are exact to the millisecond (rounded up):
//     a denied request retried after RetryAfter fits, unless others took
//     the quota first; a cost above Burst is never admitted (RetryAfter -1);
//   - state: one key per limit, expiring when the limit is full again
//     (never later than the time to refill the whole burst). The key's
//     expiry is the state (the theoretical arrival time, rounded up to the
//     millisecond; for an emission interval that is not a whole number of
//     milliseconds the key's value carries the fraction, in integer
//     microseconds, so there is no floating-point drift), and an admitted
//     call makes one PTTL and, on a live key, an INCRBY (which also checks
//     the value) and a PEXPIRE, or, on a new one, a SET; no TIME. (An
//     arrival time more than 31 years ahead is kept in microseconds since
//     the Unix epoch, on TIME, and read back as up to 2 ms later.) A
//     limit whose rate changes reads the other form as no less used than
//     it was (for a limit of whole milliseconds, rounded up to the
//     millisecond);
//   - a key that holds anything else is limiter.ErrCorruptCounter, and the
//     call leaves every key as it found it; a key stripped of its TTL by
//     hand is read as no less used than when it was last written (as used
//     as the calls made it since the key was last written whole, up to the
//     whole burst: the quota that came back in between is not counted),
//     and gets its TTL back at the next call;
//   - time source: the Redis server's clock, never the app server's;
//   - the emission interval is rounded up to a whole microsecond, so the
//     rate is never exceeded; a limit of more than one unit per
//     microsecond, or whose burst takes longer than MaxRefill to refill, is
//     limiter.ErrInvalidLimit, returned before any I/O;
//   - keys per decision: one per limit, in one Cluster slot;
//   - Redis 5.0 or later, or a server that runs Lua, such as miniredis.
//     miniredis moves key expiry only when a test moves it (FastForward;
//     limitertest moves it with TIME), so there a limit refills only as
//     the test moves the clock, and moves of whole milliseconds keep it
//     exact (miniredis keeps fractions of a millisecond in a TTL that
//     PTTL drops); its INCRBY reads a value such as "007", which Redis
//     refuses, as an integer.
//
// Upgrading from a release that kept limits as a microsecond TAT since the
// Unix epoch: the old script reads the new states as a TAT far in the
// future, so during a rolling deploy old processes deny such a subject
// (and mark its burst used up) until the new ones take over: they never
// admit more than the limit, and may admit less for one refill. The new
// script reads the old state (a limit not of whole milliseconds on TIME,
// as up to 2 ms more used) and writes it in the new form when it admits.
type GCRA struct{}

// NewGCRA returns the GCRA strategy.
func NewGCRA() GCRA { return GCRA{} }

// Decide implements limiter.Strategy.
func (GCRA) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	return decideInts(ctx, st, req, gcraScript, "gcra", gcraParams, bindByBurst)
}

// CheckLimit implements limiter.LimitChecker: GCRA admits at most one unit
// per microsecond, and refills a burst in at most MaxRefill.
func (GCRA) CheckLimit(l limiter.Limit) error {
	_, _, err := gcraParams(l)
	return err
}

// burstOf is the most l admits at once: its Burst, or its Rate when 0.
func burstOf(l limiter.Limit) int64 {
	if l.Burst > 0 {
		return l.Burst
	}
	return l.Rate
}

// gcraParams returns l's emission interval in whole microseconds (rounded
// up) and its burst, or limiter.ErrInvalidLimit when GCRA cannot hold l
// exactly.
func gcraParams(l limiter.Limit) (interval, burst int64, err error) {
	us := l.Period.Microseconds()
	if l.Rate > us {
		return 0, 0, fmt.Errorf("%w: %s: GCRA admits at most one unit per microsecond", limiter.ErrInvalidLimit, l)
	}
	interval = (us + l.Rate - 1) / l.Rate
	burst = burstOf(l)
	if burst > MaxRefill.Microseconds()/interval {
		return 0, 0, fmt.Errorf("%w: %s with burst %d takes more than %s to refill", limiter.ErrInvalidLimit, l, burst, MaxRefill)
	}
	return interval, burst, nil
}
