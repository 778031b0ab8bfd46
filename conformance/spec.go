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
	// Window: a counter's window starts with its first request, lasts the
	// Period and is never extended (fixed-window semantics).
	Window bool
	// TTLSlack is how much longer than its Period a key may live (a grace
	// period); 0 for FixedWindow.
	TTLSlack time.Duration
	// Commit is the command whose execution makes a decision take effect
	// (EVALSHA for a script, EXEC for a transaction); the lost-reply check
	// drops its reply.
	Commit string
}

// FixedWindow is the Spec of strategy.FixedWindow.
func FixedWindow() Spec {
	return Spec{
		Name:     "FixedWindow",
		Strategy: strategy.NewFixedWindow(),
		Exact:    true,
		Counter:  true,
		Window:   true,
		Commit:   "EVALSHA",
	}
}

// Strategies returns the Specs of every strategy this module ships.
func Strategies() []Spec {
	return []Spec{FixedWindow()}
}
