package conformance_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/conformance/knownbad"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// Prove your own strategy (or store adapter) with the suite. In a test file
// the usual call is conformance.RunStrategyTests(t, maker, spec), or
// conformance.RunStoreTests(t, maker) for an adapter; Run is the same suite
// without the testing package. Here "mine" is a hand-written GET-then-INCR
// limiter claiming fixed-window guarantees, and the suite refutes it.
func ExampleRun() {
	// A Dialer connects your adapter to the Redis the suite starts.
	dial := func(_ context.Context, addr string) (store.Store, func(), error) {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		return goredis.New(rdb), func() { _ = rdb.Close() }, nil
	}
	mine := conformance.Spec{
		Name:     "mine",
		Strategy: knownbad.GetThenIncr{}, // your limiter.Strategy
		Exact:    true,                   // the guarantees it claims
		Counter:  true,
		Window:   true,
	}
	var checks []conformance.Check
	for _, name := range []string{"forced-leak", "self-repair", "window-never-slides"} {
		ch, _ := conformance.CheckByName(name)
		checks = append(checks, ch)
	}
	specs := []conformance.Spec{conformance.FixedWindow(), mine}
	for _, o := range conformance.Run(context.Background(), conformance.Miniredis(dial), specs, checks, false) {
		verdict := "pass"
		if !o.Passed {
			verdict = "FAIL"
		}
		fmt.Printf("%-11s P%02d %-19s %s\n", o.Spec, o.ID, o.Check, verdict)
	}
	// Output:
	// FixedWindow P06 forced-leak         pass
	// FixedWindow P11 self-repair         pass
	// FixedWindow P09 window-never-slides pass
	// mine        P06 forced-leak         FAIL
	// mine        P11 self-repair         FAIL
	// mine        P09 window-never-slides pass
}
