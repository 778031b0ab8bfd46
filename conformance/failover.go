package conformance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// FailingOver proves, on a Redis Cluster of its own (three masters started
// for t, skipping without redis-server and redis-cli unless
// REQUIRE_REDIS=1), that decisions go on exactly through a manual failover,
// as operators run for an upgrade (CLUSTER FAILOVER on a replica: the
// master stops taking writes until its replica has every one, and the
// replica takes its slots), for each way the library's strategies reach
// Redis: a script (FixedWindow), MULTI/EXEC transactions (Bucketed) and
// WATCH with MULTI/EXEC (Optimistic), each through a store of its own from
// cluster. A node joins the Cluster after the stores read its slot map, as
// a replica of the master of each strategy's subject. At 5 per hour under
// FailOpen, 2 calls are counted before the failover; 1 is made as it
// starts (it runs before the switch, or the master holds it until the
// replica has taken over and answers MOVED); once the old master has
// become its replica's replica, 2 of 3 calls are admitted. Each call is
// decided by Redis (never Degraded, never an error): the new master holds
// every count, and each store, meeting the demoted master at least once,
// followed its MOVED to a node the store had not met.
//
// A store that gives MOVED as the call's error, or keeps sending a slot's
// calls to the demoted master, admits them uncounted under FailOpen
// (denies them under FailClosed). node connects a single-node store of the
// same adapter to a node. It is not in StoreChecks because it changes the
// Cluster's masters: it never runs on a Cluster it did not start.
func FailingOver(t testing.TB, cluster ClusterDialer, node Dialer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addrs, nodes := ownCluster(ctx, t, node)
	l := limiter.PerHour(5)
	ids := nodeIDs(ctx, t, nodes)
	const from = 1 // the master that fails over
	slots, _ := store.String(mustDo(ctx, t, nodes[0], "CLUSTER", "NODES").Val)
	type run struct {
		name    string
		lim     *limiter.Limiter
		subject string
	}
	var runs []run
	for _, s := range []namedStrategy{
		{"FixedWindow", "ft", strategy.NewFixedWindow()},
		{"Bucketed", "fb", strategy.NewBucketed()},
		{"Optimistic", "fo", strategy.NewOptimistic()},
	} {
		// a store of its own, whose slot map no other strategy's calls
		// bring up to date: each meets the demoted master
		st, closeSt, err := cluster(ctx, addrs)
		if err != nil {
			t.Fatalf("dial cluster: %v", err)
		}
		defer closeSt()
		lim, err := limiter.New(st, s.strategy, limiter.WithPrefix(s.prefix), limiter.WithFailMode(limiter.FailOpen))
		if err != nil {
			t.Fatal(err)
		}
		r := run{name: s.name, lim: lim}
		for i := 0; r.subject == ""; i++ {
			subject := fmt.Sprintf("%s-failover-%d", s.prefix, i)
			key, err := limiter.Key(s.prefix, subject, l)
			if err != nil {
				t.Fatal(err)
			}
			slot, err := store.Int64(mustDo(ctx, t, nodes[0], "CLUSTER", "KEYSLOT", key).Val)
			if err != nil {
				t.Fatal(err)
			}
			if owner, err := redistest.SlotOwner(slots, int(slot)); err == nil && owner == ids[from] {
				r.subject = subject
			}
		}
		runs = append(runs, r)
	}

	addr, replica := joinNode(ctx, t, addrs, nodes[0], node)
	mustDo(ctx, t, replica, "CLUSTER", "REPLICATE", ids[from])
	all := append(slices.Clip(nodes), replica)
	waitUntil(t, fmt.Sprintf("%s to replicate master %s, known as its replica by every node", addr, addrs[from]), func() bool {
		info, _ := store.String(nodeDo(ctx, t, replica, "INFO", "replication").Val)
		if !strings.Contains(info, "master_link_status:up") {
			return false
		}
		for _, n := range all {
			list, _ := store.String(nodeDo(ctx, t, n, "CLUSTER", "NODES").Val)
			if !strings.Contains(list, "slave "+ids[from]+" ") { // "myself,slave" on the replica
				return false
			}
		}
		return true
	})

	decide := func(r run, phase string, n, want int) {
		t.Helper()
		decideCalls(ctx, t, r.lim, r.name, phase, r.subject, n, want, l)
	}
	for _, r := range runs {
		decide(r, "before the failover", 2, 2)
	}
	mustDo(ctx, t, replica, "CLUSTER", "FAILOVER")
	for _, r := range runs {
		decide(r, "as the master's replica takes over (CLUSTER FAILOVER)", 1, 1)
	}
	waitUntil(t, fmt.Sprintf("%s to take over from %s", addr, addrs[from]), func() bool {
		mine, _ := store.String(nodeDo(ctx, t, replica, "INFO", "replication").Val)
		old, _ := store.String(nodeDo(ctx, t, nodes[from], "INFO", "replication").Val)
		return strings.Contains(mine, "role:master") && strings.Contains(old, "role:slave")
	})
	for _, r := range runs {
		decide(r, "after the failover (the demoted master answers MOVED)", 3, 2)
	}
}

// waitUntil polls cond every 50 ms for up to 30 s and fails t, saying what
// it waited for, when cond never held.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30 s for %s", what)
		}
	}
}
