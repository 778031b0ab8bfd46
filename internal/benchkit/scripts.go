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

//go:embed lua/gcra_floor.lua
var gcraFloorLua string

var (
	minimalScript   = store.NewScript(minimalLua)
	incrPTTLScript  = store.NewScript(incrPTTLLua)
	gcraFloorScript = store.NewScript(gcraFloorLua)
)

// GCRAFloorScript returns the least a GCRA decision on the server's clock
// makes Redis do, deciding nothing (KEYS[1] the state; ARGV[1] "3": TIME,
// GET, SET PX; "2": TIME, SET PX GET; "1": TIME alone; returns 1): the
// floors the GCRA server-time benchmark reports beside the strategies.
func GCRAFloorScript() *store.Script { return gcraFloorScript }

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
	return Admitted("AlignedWindow", lim, l)
}

// Admitted is the variant name: one decision of l through lim, an error
// when it is denied.
func Admitted(name string, lim *limiter.Limiter, l limiter.Limit) Variant {
	return Variant{Name: name, Decide: func(ctx context.Context, subject string) error {
		r, err := lim.Allow(ctx, subject, l)
		if err == nil && !r.Allowed {
			err = fmt.Errorf("%s denied %s", name, subject)
		}
		return err
	}}
}
