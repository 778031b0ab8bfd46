package benchkit

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

//go:embed lua/minimal.lua
var minimalLua string

//go:embed lua/incr_pttl.lua
var incrPTTLLua string

var (
	minimalScript  = store.NewScript(minimalLua)
	incrPTTLScript = store.NewScript(incrPTTLLua)
)

// MinimalScript returns the minimal hand-written fixed window (INCR, and
// PEXPIRE when the counter is new; KEYS[1] the counter, ARGV[1] the window
// in ms; returns the count): the floor the server-time benchmarks compare
// with.
func MinimalScript() *store.Script { return minimalScript }

// IncrPTTLScript returns ulule/limiter's design (INCRBY, PEXPIRE when new,
// else PTTL; KEYS[1] the counter, ARGV[1] the cost, ARGV[2] the window in
// ms; returns {count, ttl_ms}), for comparison in the same run.
func IncrPTTLScript() *store.Script { return incrPTTLScript }

// AlignedWindow is the variant "AlignedWindow": one decision of l through
// lim (a Limiter of strategy.AlignedWindow), an error when it is denied.
func AlignedWindow(lim *limiter.Limiter, l limiter.Limit) Variant {
	return Variant{Name: "AlignedWindow", Decide: func(ctx context.Context, subject string) error {
		r, err := lim.Allow(ctx, subject, l)
		if err == nil && !r.Allowed {
			err = fmt.Errorf("AlignedWindow denied %s", subject)
		}
		return err
	}}
}
