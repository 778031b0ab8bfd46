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
	node, cluster := goredisNode, goredisCluster
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

// goredisNode connects a go-redis store to one node.
func goredisNode(_ context.Context, addr string) (store.Store, func(), error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	return goredis.New(rdb), func() { _ = rdb.Close() }, nil
}

// goredisCluster connects go-redis Cluster stores with MaxRedirects set to
// redirects.
func goredisCluster(redirects int) ClusterDialer {
	return func(_ context.Context, addrs []string) (store.Store, func(), error) {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: redirects})
		return goredis.New(rdb), func() { _ = rdb.Close() }, nil
	}
}

// TestFailingOverFailsWithoutRedirections: FailingOver fails a Cluster
// client that does not follow MOVED (go-redis with MaxRedirects -1): the
// call the demoted master answers MOVED is admitted Degraded, uncounted,
// for each way a strategy reaches Redis; with redirections followed it
// passes.
func TestFailingOverFailsWithoutRedirections(t *testing.T) {
	for _, tc := range []struct {
		name      string
		redirects int
		pass      bool
	}{{"MaxRedirects 0 (3)", 0, true}, {"MaxRedirects -1", -1, false}} {
		o := record(context.Background(), func(r testing.TB) { FailingOver(r, goredisCluster(tc.redirects), goredisNode) })
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
			if !slices.ContainsFunc(o.Messages, func(m string) bool {
				return strings.HasPrefix(m, s+": ") && strings.Contains(m, "want decided by Redis")
			}) {
				t.Errorf("%s: %s failed without saying that a call was not decided by Redis: %s", tc.name, s, msgs)
			}
		}
	}
}
