package conformance

import (
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// Spec is a strategy under test together with the guarantees it declares.
// The suite holds the strategy to exactly what it declares.
type Spec struct {
	// Name names the strategy in reports.
	Name string
	// Strategy is the strategy under test.
	Strategy limiter.Strategy
	// Exact: under contention it admits exactly the limit (not merely at
	// most).
	Exact bool
	// DeniedConsume: a denied request consumes quota.
	DeniedConsume bool
	// Counter: each limit's key holds its count as a base-10 integer, so the
	// suite can read the server's counter directly (GET).
	Counter bool
	// Window: fixed-window semantics: a counter's window lasts the Period
	// and is never extended. It starts with its first request, or, when
	// Aligned, at a multiple of the Period since the Unix epoch.
	Window bool
	// Aligned: windows are [b·Period, (b+1)·Period) since the Unix epoch by
	// the server's TIME, not first-request windows; the checks compute
	// their expectations from TIME.
	Aligned bool
	// Compensates: a denied request is counted, then taken back in a
	// second round trip; a lost compensation leaves an over-count (at most
	// the cost) until the window ends. Without it, and without
	// DeniedConsume, a denied request writes nothing.
	Compensates bool
	// TTLSlack is how much longer than its Period a key may live (a grace
	// period); 0 for FixedWindow.
	TTLSlack time.Duration
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
	// (property 13 skews it). Nil: the strategy never reads the app clock.
	Clocked func(now func() time.Time) limiter.Strategy
	// Scripts: the strategy runs Lua (EVAL, EVALSHA), which a server or an
	// ACL may refuse.
	Scripts bool
	// MinVersion is the oldest Redis version the strategy is correct on
	// ("6.0.9"); "" for any.
	MinVersion string
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
	}
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
		Optimistic: func(n int) limiter.Strategy {
			return strategy.NewOptimistic(strategy.WithMaxAttempts(n))
		},
	}
}

// Strategies returns the Specs of every strategy this module ships.
func Strategies() []Spec {
	return []Spec{FixedWindow(), Bucketed(), Optimistic()}
}
