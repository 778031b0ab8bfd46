package rueidis_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	rueidisstore "github.com/quotagate/limiter/store/rueidis"
)

// newClusterStore connects a Store with the documented options to the
// Cluster of addrs and closes it when the test ends.
func newClusterStore(t *testing.T, addrs []string) *rueidisstore.Store {
	t.Helper()
	opt := options(addrs[0])
	opt.InitAddress = addrs
	opt.Dialer.Timeout = dialTimeout
	return storeFor(t, opt)
}

// infoField reads one numeric field of a section of INFO (0 when absent:
// INFO commandstats and errorstats list only what happened).
func infoField(t *testing.T, st store.Store, section, field, sub string) int {
	t.Helper()
	info, _ := store.String(do1(t, st, "INFO", section).Val)
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), field+":")
		if !ok {
			continue
		}
		if sub == "" {
			n, err := strconv.Atoi(rest)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, sub+"="); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
	}
	return 0
}

// TestClusterWatchKeepsConnectionsPerNode: on a Cluster, Watch hands no
// dedicated connection back to rueidis either (whose hand-back panics the
// process when it meets a node's BUSY, see TestWatchThenBusyServer): no
// node ever receives the commands rueidis sends on a hand-back (UNSUBSCRIBE
// ... DISCARD). It keeps them per node instead, so 4 callers making 40
// Watches each over 40 keys open about 4 connections per node, and it
// learns each slot's node: at most one MOVED per key (its first Watch may
// try another node), not one per Watch. Every INCR is counted once.
func TestClusterWatchKeepsConnectionsPerNode(t *testing.T) {
	cl := redistest.StartCluster(t)
	addrs := cl.Addrs()
	nodes := make([]*rueidisstore.Store, len(addrs))
	conns := make([]int, len(addrs))
	for i, a := range addrs {
		nodes[i] = newStore(t, a, nil)
	}
	st := newClusterStore(t, addrs)
	for i, n := range nodes {
		do1(t, n, "CONFIG", "RESETSTAT")
		conns[i] = infoField(t, n, "stats", "total_connections_received", "")
	}
	const callers, keysEach, rounds = 4, 10, 4
	if err := hammerWatchKeys(st, callers, keysEach*rounds, func(g, i int) string { return fmt.Sprintf("cw%d-%d", g, i%keysEach) }); err != nil {
		t.Fatal(err)
	}
	for g := range callers {
		for k := range keysEach {
			key := fmt.Sprintf("cw%d-%d", g, k)
			rs, err := st.Do(context.Background(), store.Cmd{Name: "GET", Args: []any{key}})
			if err != nil || rs[0].Err != nil || rs[0].Val != "4" {
				t.Errorf("GET %s = %v, %v; want 4 (one INCR per Watch)", key, rs, err)
			}
		}
	}
	time.Sleep(200 * time.Millisecond) // (a hand-back runs in the background)
	moved, dialed := 0, 0
	for i, n := range nodes {
		for _, cmd := range []string{"discard", "unsubscribe", "punsubscribe", "sunsubscribe"} {
			if c := infoField(t, n, "commandstats", "cmdstat_"+cmd, "calls"); c != 0 {
				t.Errorf("node %s received %d %s: a dedicated connection was handed back to rueidis", addrs[i], c, strings.ToUpper(cmd))
			}
		}
		moved += infoField(t, n, "errorstats", "errorstat_MOVED", "count")
		dialed += infoField(t, n, "stats", "total_connections_received", "") - conns[i]
	}
	if keys := callers * keysEach; moved > keys {
		t.Errorf("%d MOVED for %d Watches on %d keys; want at most one per key (a slot's node is learned)", moved, callers*keysEach*rounds, keys)
	}
	// one per caller and node, and the client's own, with room for a
	// connection closed by a slow machine
	if limit := (callers + 2) * len(addrs); dialed > limit {
		t.Errorf("%d connections made for %d Watches by %d callers on %d nodes; want at most %d (kept for the next Watch)", dialed, callers*keysEach*rounds, callers, len(addrs), limit)
	}
	t.Logf("%d Watches: %d connections made, %d MOVED", callers*keysEach*rounds, dialed, moved)
}

// TestClusterWatchFollowsMovedSlot: a Watch whose key's slot has moved to
// another node since the Store learned its node follows the MOVED the old
// node answers to the WATCH, on a connection of the new node, and counts
// once. (A Cluster client's dedicated connection, pinned to the slot map
// rueidis read before the move, returned the MOVED as the Watch's error.)
func TestClusterWatchFollowsMovedSlot(t *testing.T) { testWatchFollowsMove(t, false) }

// TestClusterWatchFollowsMoveToANewNode: the same when the slot moves to a
// node that joined the Cluster after the client read its slots, which
// rueidis does not know yet: the first Watch after the move counts on it.
// (Through the Cluster client's dedicated connection, which follows
// rueidis's slot map, Watches failed with MOVED until rueidis refreshed
// the map, up to a second later.)
func TestClusterWatchFollowsMoveToANewNode(t *testing.T) { testWatchFollowsMove(t, true) }

func testWatchFollowsMove(t *testing.T, newNode bool) {
	cl := redistest.StartCluster(t)
	addrs := cl.Addrs()
	st := newClusterStore(t, addrs)
	ctx := context.Background()
	const key = "moving"
	for i := range 2 {
		if err := watchIncr(ctx, st, key, nil); err != nil {
			t.Fatalf("Watch %d before the move: %v", i, err)
		}
	}
	if newNode {
		addrs = append(addrs, addNode(t, addrs))
	}
	nodes := make([]*rueidisstore.Store, len(addrs))
	from := -1
	for i, a := range addrs {
		nodes[i] = newStore(t, a, nil)
		if r := do1(t, nodes[i], "GET", key); r.Err == nil {
			from = i
		}
	}
	if from < 0 {
		t.Fatalf("no node serves %s", key)
	}
	to := (from + 1) % len(addrs)
	if newNode {
		to = len(addrs) - 1
	}
	moveSlot(t, nodes, addrs, from, to, key)
	movedBefore := infoField(t, nodes[from], "errorstats", "errorstat_MOVED", "count")
	for i := range 3 {
		if err := watchIncr(ctx, st, key, nil); err != nil {
			t.Fatalf("Watch %d after the move to %s: %v", i, addrs[to], err)
		}
	}
	if r := do1(t, nodes[to], "GET", key); r.Err != nil || r.Val != "5" {
		t.Errorf("GET %s on the new node = %v, %v; want 5", key, r.Val, r.Err)
	}
	// one to the WATCH (the new node is learned), and for a node rueidis
	// did not know one more to the read through the Cluster client
	want := 1
	if newNode {
		want = 2
	}
	if n := infoField(t, nodes[from], "errorstats", "errorstat_MOVED", "count") - movedBefore; n != want {
		t.Errorf("the old node answered %d MOVED to the 3 Watches after the move; want %d", n, want)
	}
}

// addNode starts a cluster-enabled redis-server, meets it into the Cluster
// of addrs, waits until every node knows it and the Cluster is ok (it
// serves no slot), and returns its address.
func addNode(t *testing.T, addrs []string) string {
	t.Helper()
	d := redistest.StartServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
	host, port, _ := strings.Cut(d.Addr(), ":")
	if r := do1(t, newStore(t, addrs[0], nil), "CLUSTER", "MEET", host, port); r.Err != nil {
		t.Fatal(r.Err)
	}
	all := append([]string{d.Addr()}, addrs...)
	nodes := make([]*rueidisstore.Store, len(all))
	for i, a := range all {
		nodes[i] = newStore(t, a, nil)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ok := true
		for _, n := range nodes {
			list, _ := store.String(do1(t, n, "CLUSTER", "NODES").Val)
			info, _ := store.String(do1(t, n, "CLUSTER", "INFO").Val)
			if strings.Count(list, " connected") < len(all) || strings.Contains(list, "handshake") || !strings.Contains(info, "cluster_state:ok") {
				ok = false
			}
		}
		if ok {
			return d.Addr()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node %s did not join the Cluster in 30 s", d.Addr())
		}
	}
}

// moveSlot moves key's slot, and key, from node from to node to, and tells
// every node of it.
func moveSlot(t *testing.T, nodes []*rueidisstore.Store, addrs []string, from, to int, key string) {
	t.Helper()
	m := startMove(t, nodes, addrs, from, to, key)
	if err := m.migrate(key); err != nil {
		t.Fatal(err)
	}
	if err := m.finish(); err != nil {
		t.Fatal(err)
	}
}

// slotMove is a slot's migration from node from to node to, in the steps
// a resharding takes: startMove marks the slot importing and migrating,
// migrate moves one key, finish gives the slot to the target on every
// node. migrate and finish return errors, to be called from any goroutine.
type slotMove struct {
	nodes      []*rueidisstore.Store
	addrs      []string
	from, to   int
	slot       any
	target     string // the target's id
	host, port string
}

// startMove starts the migration of key's slot from node from to node to.
func startMove(t *testing.T, nodes []*rueidisstore.Store, addrs []string, from, to int, key string) *slotMove {
	t.Helper()
	m := &slotMove{nodes: nodes, addrs: addrs, from: from, to: to}
	m.slot = do1(t, nodes[from], "CLUSTER", "KEYSLOT", key).Val
	m.target, _ = store.String(do1(t, nodes[to], "CLUSTER", "MYID").Val)
	source, _ := store.String(do1(t, nodes[from], "CLUSTER", "MYID").Val)
	m.host, m.port, _ = strings.Cut(addrs[to], ":")
	for _, err := range []error{
		m.do(to, "CLUSTER", "SETSLOT", m.slot, "IMPORTING", source),
		m.do(from, "CLUSTER", "SETSLOT", m.slot, "MIGRATING", m.target),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// migrate moves key to the target.
func (m *slotMove) migrate(key string) error {
	return m.do(m.from, "MIGRATE", m.host, m.port, key, 0, 5000)
}

// finish gives the slot to the target: on the target, the source, then
// the others.
func (m *slotMove) finish() error {
	order := []int{m.to, m.from}
	for i := range m.nodes {
		if i != m.from && i != m.to {
			order = append(order, i)
		}
	}
	for _, i := range order {
		if err := m.do(i, "CLUSTER", "SETSLOT", m.slot, "NODE", m.target); err != nil {
			return err
		}
	}
	return nil
}

// do sends one command to node n and returns its error or the server's.
func (m *slotMove) do(n int, args ...any) error {
	rs, err := m.nodes[n].Do(context.Background(), store.Cmd{Name: args[0].(string), Args: args[1:]})
	if err == nil {
		err = rs[0].Err
	}
	if err != nil {
		return fmt.Errorf("%v on %s: %w", args, m.addrs[n], err)
	}
	return nil
}

// TestClusterWatchThenBusyNode: while another client's script holds one
// node (BUSY), Watches of its keys fail with the server's error and count
// nothing, Watches of another node's keys go on, and once the script ends
// the first node's work again; the process lives (rueidis panics when a
// dedicated connection is handed back to it during BUSY, which the Store
// never does: TestClusterWatchKeepsConnectionsPerNode).
func TestClusterWatchThenBusyNode(t *testing.T) {
	cl := redistest.StartCluster(t)
	addrs := cl.Addrs()
	st := newClusterStore(t, addrs)
	ctx := context.Background()
	// a key served by the first node, and one by another
	keys := [2]string{}
	first := newStore(t, addrs[0], nil)
	for i := 0; keys[0] == "" || keys[1] == ""; i++ {
		if i == 1000 {
			t.Fatalf("no key of the first node and another among busy0..999: %v", keys)
		}
		k := fmt.Sprintf("busy%d", i)
		r := do1(t, first, "EXISTS", k)
		switch {
		case r.Err == nil && keys[0] == "":
			keys[0] = k
		case r.Err != nil && keys[1] == "":
			keys[1] = k
		}
	}
	for range 3 {
		for _, k := range keys {
			if err := watchIncr(ctx, st, k, nil); err != nil {
				t.Fatalf("Watch %s: %v", k, err)
			}
		}
	}
	end := redistest.Busy(t, addrs[0])
	other := 0
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := watchIncr(wctx, st, keys[0], nil); err == nil || !strings.Contains(err.Error(), "BUSY") {
			t.Errorf("Watch of %s on the node a script holds = %v; want the server's BUSY error", keys[0], err)
		}
		if err := watchIncr(wctx, st, keys[1], nil); err != nil {
			t.Errorf("Watch of %s on another node while the first is BUSY: %v", keys[1], err)
		} else {
			other++
		}
		cancel()
	}
	end()
	for i := range 3 {
		if err := watchIncr(ctx, st, keys[0], nil); err != nil {
			t.Fatalf("Watch %d of %s after the script ended: %v", i, keys[0], err)
		}
	}
	for k, want := range map[string]string{keys[0]: "6", keys[1]: fmt.Sprint(3 + other)} {
		if rs, err := st.Do(ctx, store.Cmd{Name: "GET", Args: []any{k}}); err != nil || rs[0].Err != nil || rs[0].Val != want {
			t.Errorf("GET %s = %v, %v; want %s", k, rs, err, want)
		}
	}
}

// TestClusterWatchWaitsForASplitSlot: a WATCH of two keys of one slot that
// a migration has split between two nodes (one moved, one not yet) is
// refused with TRYAGAIN, which ran nothing; Watch sends it again after a
// pause until the migration has moved the other key (300 ms later), then
// follows the MOVED, and the transaction counts once. (It failed with the
// TRYAGAIN, which the redigo and go-redis adapters wait out.)
func TestClusterWatchWaitsForASplitSlot(t *testing.T) {
	ctx := context.Background()
	keys := []string{"{split}a", "{split}b"}
	st, addrs, nodes, from := clusterWithKeys(t, keys)
	m := startMove(t, nodes, addrs, from, (from+1)%len(addrs), keys[0])
	if err := m.migrate(keys[0]); err != nil {
		t.Fatal(err)
	}
	moved := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		err := m.migrate(keys[1])
		if err == nil {
			err = m.finish()
		}
		moved <- err
	}()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second) // (TryAgainPause waits within it)
	defer cancel()
	start := time.Now()
	err := st.Watch(wctx, keys, func(tx store.Tx) error {
		_, err := tx.Exec(wctx, store.Cmd{Name: "INCR", Args: []any{keys[0]}}, store.Cmd{Name: "INCR", Args: []any{keys[1]}})
		return err
	})
	took := time.Since(start)
	if err := <-moved; err != nil {
		t.Fatalf("the rest of the migration: %v", err)
	}
	if err != nil {
		t.Fatalf("Watch of keys split by a migration: %v (after %v)", err, took)
	}
	for _, k := range keys {
		if r := do1(t, nodes[m.to], "GET", k); r.Err != nil || r.Val != "2" {
			t.Errorf("GET %s on the new node = %v, %v; want 2", k, r.Val, r.Err)
		}
	}
	if took < 250*time.Millisecond {
		t.Errorf("Watch returned after %v, before the migration ended (300 ms): it did not meet the TRYAGAIN", took)
	}
}

// TestClusterWatchNeverLearnsAReplica: a Cluster client that reads from
// replicas (SendToReplicas: its replica connections are READONLY) lists
// the replicas among its nodes. A READONLY replica accepts a WATCH of its
// master's keys (WATCH is no write) and its reads, and refuses the EXEC of
// writes with MOVED: a Watch that guessed the replica for a slot, and
// learned it as the slot's node, had every transaction of that slot
// refused. Each Watch of 24 keys of the replica's master counts.
func TestClusterWatchNeverLearnsAReplica(t *testing.T) {
	cl := redistest.StartCluster(t)
	addrs := cl.Addrs()
	raddr := addNode(t, addrs)
	master := newStore(t, addrs[0], nil)
	replica := newStore(t, raddr, nil)
	id, _ := store.String(do1(t, master, "CLUSTER", "MYID").Val)
	if r := do1(t, replica, "CLUSTER", "REPLICATE", id); r.Err != nil {
		t.Fatal(r.Err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		info, _ := store.String(do1(t, replica, "INFO", "replication").Val)
		ok := strings.Contains(info, "master_link_status:up")
		_, rport, _ := strings.Cut(raddr, ":")
		for _, a := range addrs {
			// (CLUSTER SLOTS, which clients read, lists a replica once
			// the other nodes know it has replicated)
			slots := fmt.Sprint(do1(t, newStore(t, a, nil), "CLUSTER", "SLOTS").Val)
			ok = ok && strings.Contains(slots, " "+rport+" ")
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not become a replica of %s", raddr, addrs[0])
		}
	}
	opt := options(addrs[0])
	opt.InitAddress = addrs
	opt.Dialer.Timeout = dialTimeout
	opt.SendToReplicas = func(cmd rueidis.Completed) bool { return cmd.IsReadOnly() }
	st := storeFor(t, opt)
	nodes, _ := store.String(do1(t, master, "CLUSTER", "NODES").Val)
	var keys []string
	for i := 0; len(keys) < 24; i++ {
		k := fmt.Sprintf("replica-%d", i)
		slot, _ := store.Int64(do1(t, master, "CLUSTER", "KEYSLOT", k).Val)
		if owner, err := redistest.SlotOwner(nodes, int(slot)); err == nil && owner == id {
			keys = append(keys, k)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for round := range 2 {
		for _, k := range keys {
			if err := watchIncr(ctx, st, k, nil); err != nil {
				t.Fatalf("round %d: Watch of %s, a key of the replica's master: %v", round+1, k, err)
			}
		}
	}
	for _, k := range keys {
		if r := do1(t, master, "GET", k); r.Val != "2" {
			t.Errorf("GET %s on its master = %v, %v; want 2", k, r.Val, r.Err)
		}
	}
}

// clusterWithKeys starts a Cluster, a Store on it and one on each node, and
// sets keys (of one slot) to 1 on the node that holds them, from.
func clusterWithKeys(t *testing.T, keys []string) (st *rueidisstore.Store, addrs []string, nodes []*rueidisstore.Store, from int) {
	t.Helper()
	addrs = redistest.StartCluster(t).Addrs()
	st = newClusterStore(t, addrs)
	nodes = make([]*rueidisstore.Store, len(addrs))
	from = -1
	for i, a := range addrs {
		nodes[i] = newStore(t, a, nil)
		if r := do1(t, nodes[i], "EXISTS", keys[0]); r.Err == nil {
			from = i
		}
	}
	for _, k := range keys {
		do1(t, nodes[from], "SET", k, 1)
	}
	return st, addrs, nodes, from
}
