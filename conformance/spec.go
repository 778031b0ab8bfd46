package conformance

import (
	"math"
	"slices"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// Spec is a strategy under test together with the guarantees it declares.
// The suite holds the strategy to exactly what it declares.
type Spec struct {
	// Name names the strategy in reports.
	Name string
	// Options are given to every Limiter the checks build (after the
	// check's own prefix), e.g. WithQuotaLease.
	Options []limiter.Option
	// LeaseUnits is the quota lease Options give (0: none). A leasing
	// Limiter's counters hold units leased and not yet admitted, so the
	// checks compare admissions with the limit, not with the counter.
	LeaseUnits int64
	// Strategy is the strategy under test.
	Strategy limiter.Strategy
	// Leaser, instead of Strategy, is a concurrency leaser under test: the
	// suite runs the lease checks for it (Check.For).
	Leaser limiter.Leaser
	// Exact: under contention it admits exactly the limit (not merely at
	// most).
	Exact bool
	// DeniedConsume: a denied request consumes quota.
	DeniedConsume bool
	// Counter: each limit's key holds its count as a base-10 integer, so the
	// suite can read the server's counter directly (GET).
	Counter bool
	// CountsDownFrom, when not 0: each Counter key holds CountsDownFrom −
	// the count instead of the count (it must not depend on the rate, or
	// a rule whose rate changes would lose its window's count).
	CountsDownFrom int64
	// Window: fixed-window semantics: a counter's window lasts the Period
	// and is never extended. It starts with its first request, or, when
	// Aligned, at a multiple of the Period since the Unix epoch.
	Window bool
	// Weighted: a sliding window counter: windows of a Period follow each
	// other from an idle limit's first request, and at e into one the
	// previous window's count weighs (Period − e)/Period. Property 9 then
	// checks that its windows never slide.
	Weighted bool
	// Aligned: windows are [b·Period, (b+1)·Period) since the Unix epoch by
	// the server's TIME, not first-request windows; the checks compute
	// their expectations from TIME.
	Aligned bool
	// WindowKey names the counter of window index of a limit whose key (as
	// limiter.Key lays it out) is key, for Aligned specs; the name must
	// end in the index, in decimal. Nil: key + ":" + index.
	WindowKey func(key string, period time.Duration, index int64) string
	// Compensates: a denied request is counted, then taken back in a
	// second round trip; a lost compensation leaves an over-count (at most
	// the cost) until the window ends. Without it, and without
	// DeniedConsume, a denied request writes nothing.
	Compensates bool
	// RepairsAtDenial: a key found without a TTL (stripped by hand) gets
	// its TTL back at the next denial rather than at the next admission.
	// Only for keys named by their window's index (Aligned), which are
	// never read after their window: a stripped key can never hold its
	// subject past the window (property 11 checks that too).
	RepairsAtDenial bool
	// TTLSlack is how much longer than its Period a key may live (a grace
	// period); 0 for FixedWindow.
	TTLSlack time.Duration
	// KeyPeriods is how many Periods a key may live after a write (plus
	// TTLSlack), and so the longest RetryAfter and ResetAfter: 2 for a
	// sliding window counter, whose count still weighs in the window after
	// its own; 0 means 1.
	KeyPeriods int
	// Commit is the command whose execution makes a decision take effect
	// (EVALSHA for a script, EXEC for a transaction); the lost-reply check
	// drops its reply.
	Commit string
	// RoundTrips is the number of round trips of an admitted decision in
	// steady state (1 for a script); 0 when unknown. With 1, a reply past
	// the deadline means the decision ran (property 20).
	RoundTrips int
	// Optimistic is non-nil for an optimistic strategy: it returns the
	// strategy with at most maxAttempts transactions per decision, after
	// which a decision fails with limiter.ErrContention (property 5).
	Optimistic func(maxAttempts int) limiter.Strategy
	// Clocked is non-nil for a strategy that reads the app server's clock
	// (aligned to Redis TIME): it returns the strategy reading now instead
	// (property 13 skews it; property 10 runs it on a clock that moves with
	// the virtual one). It must build the same strategy as Strategy, on
	// another clock: those checks run what it returns. Nil: the strategy
	// never reads the app clock.
	Clocked func(now func() time.Time) limiter.Strategy
	// Scripts: the strategy runs Lua (EVAL, EVALSHA), which a server or an
	// ACL may refuse.
	Scripts bool
	// MinVersion is the oldest Redis version the strategy is correct on
	// ("6.0.9"); "" for any.
	MinVersion string
	// Refills: quota comes back continuously, one unit every Period/Rate
	// (GCRA, token bucket), instead of all at once when a window ends. A
	// fresh limit admits Burst at once (Rate when Burst is 0); checks that
	// count allow for what came back while they ran.
	Refills bool
	// MillisecondClock: the strategy may read the server's clock in whole
	// milliseconds (a state kept in a key's expiry), where less than a
	// millisecond left reads as none.
	MillisecondClock bool
	// Bound is the most the strategy admits for l in any interval of
	// length d, the algorithm's documented bound that property 15 holds it
	// to. Nil derives it from the shape: a fixed window admits at most
	// (k+1)·Rate in k Periods (k = ⌈d/Period⌉), a refilling strategy
	// Burst + ⌊d·Rate/Period⌋.
	Bound func(l limiter.Limit, d time.Duration) int64
}

// MaxAdmitted is the most the strategy admits for l in any interval of
// length d: Bound when set, else the bound of its shape.
func (s Spec) MaxAdmitted(l limiter.Limit, d time.Duration) int64 {
	switch {
	case s.Bound != nil:
		return s.Bound(l, d)
	case s.Refills:
		return burst(l) + refillBound(l, d)
	}
	return WindowBound(l, d)
}

// refillBound is the most quota that comes back for l in d at Rate per
// Period: the part of a Period in floating point, as Rate may be up to
// 2^50.
func refillBound(l limiter.Limit, d time.Duration) int64 {
	return int64(d/l.Period)*l.Rate + int64(float64(d%l.Period)*float64(l.Rate)/float64(l.Period))
}

// WindowBound is the bound of fixed windows: at most Rate in each, and an
// interval of length d touches at most ⌈d/Period⌉+1 of them, so
// (⌈d/Period⌉+1)·Rate.
func WindowBound(l limiter.Limit, d time.Duration) int64 {
	return (int64((d+l.Period-1)/l.Period) + 1) * l.Rate
}

// life is how long a key of a limit of period p may live after a write.
func (s Spec) life(p time.Duration) time.Duration {
	return time.Duration(max(s.KeyPeriods, 1))*p + s.TTLSlack
}

// burst is the most a fresh limit admits at once: Burst, or Rate when 0.
func burst(l limiter.Limit) int64 {
	if l.Burst > 0 {
		return l.Burst
	}
	return l.Rate
}

// refilled is the most quota a refilling strategy can get back for l in
// d (a millisecond more, for a server clock read in whole milliseconds): 0
// for a window, whose checks stay inside one window.
func (s Spec) refilled(l limiter.Limit, d time.Duration) int64 {
	if !s.Refills {
		return 0
	}
	return refillBound(l, d+time.Millisecond)
}

// Runs reports whether the strategy can run on the server r describes: it
// may run scripts if it needs them, and the server is recent enough.
func (s Spec) Runs(r limiter.ServerReport) bool {
	if s.Scripts && !r.Scripting {
		return false
	}
	return s.MinVersion == "" || r.Version == "" || r.VersionAtLeast(s.MinVersion)
}

// FixedWindow is the Spec of strategy.FixedWindow.
func FixedWindow() Spec {
	return Spec{
		Name:       "FixedWindow",
		Strategy:   strategy.NewFixedWindow(),
		Exact:      true,
		Counter:    true,
		Window:     true,
		Commit:     "EVALSHA",
		RoundTrips: 1,
		Scripts:    true,
		// PTTL 0, the counter's expiry millisecond, is the next window's
		MillisecondClock: true,
	}
}

// FixedWindowLeased is FixedWindow decided through a Limiter with quota
// leases of 10 units (limiter.WithQuotaLease): the checks of exact
// admission hold with most decisions made in the process.
func FixedWindowLeased() Spec { return leased(FixedWindow()) }

// AlignedWindowLeased is AlignedWindow decided through a Limiter with
// quota leases of 10 units (limiter.WithQuotaLease), as FixedWindowLeased.
func AlignedWindowLeased() Spec { return leased(AlignedWindow()) }

// leased is spec decided through a Limiter with quota leases of 10 units.
func leased(spec Spec) Spec {
	spec.Name += "+lease"
	spec.Options = append(slices.Clone(spec.Options), limiter.WithQuotaLease(10))
	spec.LeaseUnits = 10
	return spec
}

// Bucketed is the Spec of strategy.Bucketed: epoch-aligned windows, denied
// requests compensated (so conservative, not exact), keys living up to 1 s
// past their window.
func Bucketed() Spec {
	return Spec{
		Name:        "Bucketed",
		Strategy:    strategy.NewBucketed(),
		Compensates: true,
		Window:      true,
		Aligned:     true,
		TTLSlack:    time.Second,
		Commit:      "EXEC",
		RoundTrips:  1,
		Clocked: func(now func() time.Time) limiter.Strategy {
			return strategy.NewBucketed(strategy.WithClock(now))
		},
	}
}

// AlignedWindow is the Spec of strategy.AlignedWindow: epoch-aligned
// windows decided in Lua, exact, every key expiring at its window's end.
func AlignedWindow() Spec {
	return Spec{
		Name:            "AlignedWindow",
		Strategy:        strategy.NewAlignedWindow(),
		Exact:           true,
		Counter:         true,
		CountsDownFrom:  strategy.AlignedCountBase,
		Window:          true,
		Aligned:         true,
		WindowKey:       strategy.AlignedWindowKey,
		RepairsAtDenial: true,
		Commit:          "EVALSHA",
		RoundTrips:      1,
		Scripts:         true,
		Clocked: func(now func() time.Time) limiter.Strategy {
			return strategy.NewAlignedWindow(strategy.WithAlignedClock(now))
		},
	}
}

// OptimisticSuiteAttempts is the retry bound of the Optimistic Spec's
// strategy: large, so that 200 callers on one key (property 1) never run
// out of attempts and the strategy is held to exactness.
const OptimisticSuiteAttempts = 1 << 12

// Optimistic is the Spec of strategy.Optimistic with a large retry bound.
func Optimistic() Spec {
	return Spec{
		Name:       "Optimistic",
		Strategy:   strategy.NewOptimistic(strategy.WithMaxAttempts(OptimisticSuiteAttempts)),
		Exact:      true,
		Counter:    true,
		Window:     true,
		Commit:     "EXEC",
		RoundTrips: 3,
		MinVersion: "6.0.9",
		// PTTL 0, the counter's expiry millisecond, is the next window's
		MillisecondClock: true,
		Optimistic: func(n int) limiter.Strategy {
			return strategy.NewOptimistic(strategy.WithMaxAttempts(n))
		},
	}
}

// GCRA is the Spec of strategy.GCRA: exact, on the server's clock, quota
// refilled one unit every Period/Rate.
func GCRA() Spec {
	return Spec{
		Name:       "GCRA",
		Strategy:   strategy.NewGCRA(),
		Exact:      true,
		Refills:    true,
		Commit:     "EVALSHA",
		RoundTrips: 1,
		Scripts:    true,
		// every limit keeps its state in its key's expiry
		MillisecondClock: true,
	}
}

// TokenBucket is the Spec of strategy.TokenBucket: exact, on the server's
// clock, refilled Rate tokens per Period; Redis 6.2 or later.
func TokenBucket() Spec {
	return Spec{
		Name:       "TokenBucket",
		Strategy:   strategy.NewTokenBucket(),
		Exact:      true,
		Refills:    true,
		Commit:     "EVALSHA",
		RoundTrips: 1,
		Scripts:    true,
		MinVersion: "6.2.0",
		// every limit keeps its state in its key's expiry
		MillisecondClock: true,
	}
}

// SlidingLog is the Spec of strategy.SlidingLog: exact, at most Rate in
// any interval one Period long.
func SlidingLog() Spec {
	return Spec{
		Name:       "SlidingLog",
		Strategy:   strategy.NewSlidingLog(),
		Exact:      true,
		Commit:     "EVALSHA",
		RoundTrips: 1,
		Scripts:    true,
		Bound:      SlidingBound,
	}
}

// SlidingWindow is the Spec of strategy.SlidingWindow: exact to its
// formula, at most Rate per window and the fixed windows' bound over any
// interval, quota coming back as the previous window's weight falls, keys
// living up to two Periods.
func SlidingWindow() Spec {
	return Spec{
		Name:       "SlidingWindow",
		Strategy:   strategy.NewSlidingWindow(),
		Exact:      true,
		Refills:    true,
		Weighted:   true,
		KeyPeriods: 2,
		// its state is the key's expiry
		MillisecondClock: true,
		Commit:           "EVALSHA",
		RoundTrips:       1,
		Scripts:          true,
		Bound:            WindowBound,
	}
}

// Concurrency is the Spec of strategy.Concurrency, the concurrency leaser.
func Concurrency() Spec {
	return Spec{
		Name:       "Concurrency",
		Leaser:     strategy.NewConcurrency(),
		Exact:      true,
		Commit:     "EVALSHA",
		RoundTrips: 1,
		Scripts:    true,
	}
}

// SlidingBound is the bound of an exact sliding window: at most Rate in
// any interval one Period long, so ⌈d/Period⌉·Rate in any interval d.
func SlidingBound(l limiter.Limit, d time.Duration) int64 {
	return int64((d+l.Period-1)/l.Period) * l.Rate
}

// StorePaths returns one Spec per way the shipped strategies use a store:
// a script (EVALSHA, falling back to EVAL), a transaction (MULTI/EXEC) and
// an optimistic transaction (WATCH on a dedicated connection). The other
// scripted strategies take FixedWindow's path. Checks of an adapter's
// transport (TLS, client options) run these.
func StorePaths() []Spec {
	return []Spec{FixedWindow(), Bucketed(), Optimistic()}
}

// Strategies returns the Specs of every strategy this module ships.
func Strategies() []Spec {
	return []Spec{FixedWindow(), AlignedWindow(), Bucketed(), Optimistic(), GCRA(), TokenBucket(), SlidingWindow(), SlidingLog(), Concurrency()}
}

// refillTime is how long a refilling strategy takes to get back used units
// of l: used·Period/Rate, rounded up to a millisecond.
func refillTime(l limiter.Limit, used int64) time.Duration {
	ns := math.Ceil(float64(used) * float64(l.Period) / float64(l.Rate))
	return (time.Duration(ns) + time.Millisecond - 1).Truncate(time.Millisecond)
}
