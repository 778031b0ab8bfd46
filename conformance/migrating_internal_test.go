package conformance

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// TestMigratingSlotFailsWithoutRedirections: MigratingSlot fails a
// Cluster client that does not follow MOVED and ASK (go-redis with
// MaxRedirects -1), which gives the redirection as the decision's error:
// under FailOpen the calls are admitted Degraded, uncounted; for each way
// a strategy reaches Redis (a script, MULTI/EXEC, WATCH).
func TestMigratingSlotFailsWithoutRedirections(t *testing.T) {
	node := func(_ context.Context, addr string) (store.Store, func(), error) {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		return goredis.New(rdb), func() { _ = rdb.Close() }, nil
	}
	cluster := func(redirects int) ClusterDialer {
		return func(_ context.Context, addrs []string) (store.Store, func(), error) {
			rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: redirects})
			return goredis.New(rdb), func() { _ = rdb.Close() }, nil
		}
	}
	for _, tc := range []struct {
		name      string
		redirects int
		pass      bool
	}{{"MaxRedirects 0 (3)", 0, true}, {"MaxRedirects -1", -1, false}} {
		o := record(context.Background(), func(r testing.TB) { MigratingSlot(r, cluster(tc.redirects), node) })
		msgs := strings.Join(o.Messages, " | ")
		if o.Skipped {
			t.Fatalf("%s: skipped: %s", tc.name, msgs)
		}
		if o.Passed != tc.pass {
			t.Errorf("%s: passed=%v, want %v: %s", tc.name, o.Passed, tc.pass, msgs)
		}
		if tc.pass {
			continue
		}
		for _, s := range []string{"FixedWindow", "Bucketed", "Optimistic"} {
			for _, phase := range []string{"(ASK): call 1", "(MOVED): call 1"} {
				if !slices.ContainsFunc(o.Messages, func(m string) bool {
					return strings.HasPrefix(m, s+": slot ") && strings.Contains(m, phase) && strings.Contains(m, "want decided by Redis")
				}) {
					t.Errorf("%s: %s failed without saying that its calls %s were not decided: %s", tc.name, s, phase, msgs)
				}
			}
		}
	}
}
