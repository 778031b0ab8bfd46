package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// UnservedSlot proves, on a Redis Cluster of its own (three masters started
// for t, skipping without redis-server and redis-cli unless
// REQUIRE_REDIS=1), that a store.Batcher from cluster gives each command
// its own outcome when one command's slot has no node: the Cluster serves
// every slot but one (cluster-require-full-coverage no, a common production
// setting), and Batches of a command on that slot followed by eight on
// other slots run the eight once each and fail the first alone, with an
// error that does not wrap store.ErrUnknownOutcome (nothing ran it); and a
// FixedWindow Limiter under FailOpen decides by Redis the asks of an
// AllowMany beside one on that slot, and concurrent Allow calls beside
// ones on that slot (a client that fails a whole pipeline for one unserved
// slot admits each of them uncounted, as Degraded). node
// connects a single-node store of the same adapter to a master, to set the
// Cluster up. It is not in StoreChecks because it changes the Cluster's
// slots: it never runs on a Cluster it did not start.
func UnservedSlot(t testing.TB, cluster ClusterDialer, node Dialer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addrs, nodes := ownCluster(ctx, t, node)
	one := func(n store.Store, args ...any) store.Reply { return nodeDo(ctx, t, n, args...) }
	l := limiter.PerHour(1)
	unserved, err := limiter.Key("ct", "unserved", l)
	if err != nil {
		t.Fatal(err)
	}
	r := one(nodes[0], "CLUSTER", "KEYSLOT", unserved)
	slot, err := store.Int64(r.Val)
	if r.Err != nil || err != nil {
		t.Fatalf("CLUSTER KEYSLOT: %v %v", r.Err, err)
	}
	for _, n := range nodes {
		if r := one(n, "CONFIG", "SET", "cluster-require-full-coverage", "no"); r.Err != nil {
			t.Fatalf("CONFIG SET cluster-require-full-coverage no: %v", r.Err)
		}
	}
	// Every node forgets the slot's owner (a node that knows of none says
	// so: "already unassigned").
	for _, n := range nodes {
		if r := one(n, "CLUSTER", "DELSLOTS", slot); r.Err != nil && !strings.Contains(r.Err.Error(), "already unassigned") {
			t.Fatalf("CLUSTER DELSLOTS %d: %v", slot, r.Err)
		}
	}
	waitUntil(t, fmt.Sprintf("the Cluster to settle with slot %d unserved", slot), func() bool {
		for _, n := range nodes {
			info, _ := store.String(one(n, "CLUSTER", "INFO").Val)
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_assigned:16383") {
				return false
			}
		}
		return true
	})
	// Connected now, the client reads a slot map without the slot.
	st, closeSt, err := cluster(ctx, addrs)
	if err != nil {
		t.Fatalf("dial cluster: %v", err)
	}
	defer closeSt()
	b, ok := st.(store.Batcher)
	if !ok {
		t.Skip("the store is not a store.Batcher")
	}
	// The command on the unserved slot comes first, beside commands on
	// every node, in several batches: a client that sends a command
	// without a node to some node, and a node's whole pipeline again when
	// its first reply is a refusal it retries (CLUSTERDOWN), runs the
	// served commands on that node twice or loses their replies; which
	// node it picks may be random, so one batch may not show it.
	const batches, served = 12, 8
	for round := range batches {
		cmds := []store.Cmd{{Name: "INCRBY", Args: []any{unserved, 1}}}
		for i := range served {
			cmds = append(cmds, store.Cmd{Name: "INCRBY", Args: []any{fmt.Sprintf("ct:{served-%d-%d}n", round, i), i + 1}})
		}
		rs := b.Batch(ctx, cmds)
		if len(rs) != len(cmds) {
			t.Fatalf("store: Batch returned %d replies for %d commands", len(rs), len(cmds))
		}
		failed := false
		for i := 1; i < len(cmds); i++ {
			if n, err := store.Int64(rs[i].Val); rs[i].Err != nil || err != nil || n != int64(i) {
				t.Errorf("store: Batch %d with a command on slot %d, which no node serves, first: %s %v = %#v, %v; want %d (its own reply: its slot is served)", round+1, slot, cmds[i].Name, cmds[i].Args, rs[i].Val, rs[i].Err, i)
				failed = true
			}
		}
		switch err := rs[0].Err; {
		case err == nil:
			t.Errorf("store: Batch %d: INCRBY on slot %d, which no node serves = %#v; want an error", round+1, slot, rs[0].Val)
			failed = true
		case errors.Is(err, store.ErrUnknownOutcome):
			t.Errorf("store: Batch %d: INCRBY on slot %d, which no node serves = %v; want an error that does not wrap ErrUnknownOutcome (no node ran it)", round+1, slot, err)
			failed = true
		}
		if failed {
			break
		}
	}

	lim, err := limiter.New(st, strategy.NewFixedWindow(), limiter.WithPrefix("ct"), limiter.WithFailMode(limiter.FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	asks := []limiter.Ask{{Key: "unserved", Limits: []limiter.Limit{l}}}
	for i := range served {
		asks = append(asks, limiter.Ask{Key: fmt.Sprintf("served-%d", i), Limits: []limiter.Limit{l}})
	}
	for round := 1; round <= 2; round++ {
		for i, d := range lim.AllowMany(ctx, asks) {
			if i == 0 {
				if !d.Result.Allowed || !d.Result.Degraded {
					t.Errorf("AllowMany, round %d: the ask on slot %d, which no node serves = %+v, %v; want a Degraded admission (FailOpen)", round, slot, d.Result, d.Err)
				}
				continue
			}
			if d.Err != nil || d.Result.Degraded || d.Result.Allowed != (round == 1) {
				t.Errorf("AllowMany, round %d: %s at %s beside an ask on slot %d, which no node serves = %+v, %v; want decided by Redis: admitted in round 1, denied in round 2", round, asks[i].Key, l, slot, d.Result, d.Err)
			}
		}
	}

	// Calls of their own, at once: a store that shares round trips among
	// concurrent calls may send the one on the unserved slot with others,
	// first, which go-redis's ClusterClient sends again, all of them. Each
	// served subject is asked twice in a row: admitted, then denied, both
	// by Redis.
	const rounds = 6
	for round := range rounds {
		var wg sync.WaitGroup
		start := make(chan struct{})
		var mu sync.Mutex
		var failures []string
		for i := range 2 * served {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if i%2 == 0 {
					r, err := lim.Allow(ctx, "unserved", l)
					if !r.Allowed || !r.Degraded {
						mu.Lock()
						failures = append(failures, fmt.Sprintf("the call on slot %d, which no node serves = %+v, %v; want a Degraded admission (FailOpen)", slot, r, err))
						mu.Unlock()
					}
					return
				}
				key := fmt.Sprintf("served-%d-%d", round, i)
				for n := 1; n <= 2; n++ {
					r, err := lim.Allow(ctx, key, l)
					if err != nil || r.Degraded || r.Allowed != (n == 1) {
						mu.Lock()
						failures = append(failures, fmt.Sprintf("call %d of %s at %s beside calls on slot %d, which no node serves = %+v, %v; want decided by Redis: admitted, then denied", n, key, l, slot, r, err))
						mu.Unlock()
						return
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(failures) > 0 {
			t.Errorf("Allow, concurrent calls, round %d of %d: %d failed: %s", round+1, rounds, len(failures), strings.Join(failures, "; "))
			break
		}
	}
}

// ownCluster starts a Cluster of three masters for t (skipping without
// redis-server and redis-cli unless REQUIRE_REDIS=1) and connects a
// single-node store of node to each master, closed when t ends.
func ownCluster(ctx context.Context, t testing.TB, node Dialer) ([]string, []store.Store) {
	t.Helper()
	addrs := redistest.StartCluster(t).Addrs()
	nodes := make([]store.Store, len(addrs))
	for i, a := range addrs {
		n, closeN, err := node(ctx, a)
		if err != nil {
			t.Fatalf("dial node %s: %v", a, err)
		}
		t.Cleanup(closeN)
		nodes[i] = n
	}
	return addrs, nodes
}

// nodeDo sends one command to n and returns its reply; a failed round
// trip fails t.
func nodeDo(ctx context.Context, t testing.TB, n store.Store, args ...any) store.Reply {
	t.Helper()
	rs, err := n.Do(ctx, store.Cmd{Name: args[0].(string), Args: args[1:]})
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return rs[0]
}
