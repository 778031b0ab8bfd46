package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// MigratingSlot proves, on a Redis Cluster of its own (three masters started
// for t, skipping without redis-server and redis-cli unless
// REQUIRE_REDIS=1), that decisions go on exactly while a slot moves from one
// node to another, as it does when a Cluster is resharded, for each way the
// library's strategies reach Redis: a script (FixedWindow), MULTI/EXEC
// transactions (Bucketed) and WATCH with MULTI/EXEC (Optimistic). For each,
// a Limiter at 5 per day under FailOpen, whose store from cluster read the
// slot map before the move, decides by Redis (never Degraded, never an
// error) and admits exactly 5 of 8 calls while the slot is being migrated
// (the source answers ASK for a key it does not hold), 2 of 4 calls once
// the slot and a subject's 3 counted calls have moved to another node
// (MOVED),
// and denies that subject, and admits fresh ones, in an AllowMany sent while
// the first slot still migrates; calls on a subject with two limits whose
// keys the migration of its slot has split between the nodes (the source
// answers TRYAGAIN until the second key moves, 300 ms later) wait for the
// move and are decided: 3 of 5 calls admitted with 2 counted before, at 5
// per day; for a subject with 1 left, an AllowMany whose first ask
// (TRYAGAIN) is admitted and whose second, on the subject's moved key alone
// (ASK), is denied: the asks of one subject in their order, never the second
// first; a Reset of a subject whose keys are split deletes them once the
// move is done (the subject has its 5 back); a new subject with two limits
// whose slot migrates with none of its keys (ASK from the source, TRYAGAIN
// from the target) waits for the migration's end and is admitted; a
// transaction whose key moved after its WATCH is store.ErrTxAborted and
// ran nothing, and so are its reads (ASK while the slot migrates, MOVED
// once it has moved), but not a read of another slot's key; a store.Watcher
// learns where a slot went (of 10 Watches 100 ms apart after the move,
// none of the last 5 meets the old node's MOVED); and, as in a
// scale-out, a slot migrating to a node that joined the Cluster after the
// store read its slot map and serves no slot yet (ASK to a node the client
// has not met) is followed: 3 of 4 calls admitted with 2 counted before.
//
// A store that does not follow a redirection it may not re-send, and
// reports it as an error or an unknown outcome, admits calls uncounted under
// FailOpen (denies them under FailClosed); so does one that does not report
// TRYAGAIN as store.ErrTryAgain, on which Script, AllowMany, Reset and
// Bucketed send the call again after a pause; and a store.Watcher that does
// not follow an ASK to the slot's target, with ASKING before the WATCH, the
// reads and the transaction. node connects a single-node store of the same
// adapter to a master, to move the slots. It is not in StoreChecks because
// it changes the Cluster's slots: it never runs on a Cluster it did not
// start.
func MigratingSlot(t testing.TB, cluster ClusterDialer, node Dialer) {
	t.Helper()
	clearOfDayEnd(t, 3*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	addrs, nodes := ownCluster(ctx, t, node)
	st, closeSt, err := cluster(ctx, addrs)
	if err != nil {
		t.Fatalf("dial cluster: %v", err)
	}
	defer closeSt()
	strategies := []namedStrategy{
		{"FixedWindow", "ct", strategy.NewFixedWindow()},
		{"Bucketed", "cb", strategy.NewBucketed()},
		{"Optimistic", "co", strategy.NewOptimistic()},
	}
	for _, s := range strategies {
		migrating(ctx, t, addrs, nodes, st, s.name, s.prefix, s.strategy)
	}
	if w, ok := st.(store.Watcher); ok {
		movedUnderWatch(ctx, t, addrs, nodes, st, w)
		watchLearnsMoves(ctx, t, addrs, nodes, w)
	}

	// A scale-out: a node joins the Cluster after the store read its
	// slots, and a slot migrates to it, the subject's key already moved:
	// the source's ASK names a node that serves no slot yet.
	addr, n := joinNode(ctx, t, addrs, nodes[0], node)
	addrs, nodes = append(addrs, addr), append(nodes, n)
	scaledOut(ctx, t, addrs, nodes, st, strategies)
}

// namedStrategy is a strategy MigratingSlot runs, with its name and the
// prefix of its subjects' keys.
type namedStrategy struct {
	name, prefix string
	strategy     limiter.Strategy
}

// joinNode starts a cluster-enabled redis-server for t, meets it into the
// Cluster through seed, and waits until every node knows it and the
// Cluster is ok; it serves no slot. It returns its address and a store of
// node on it.
func joinNode(ctx context.Context, t testing.TB, addrs []string, seed store.Store, node Dialer) (string, store.Store) {
	t.Helper()
	d := redistest.StartServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
	host, port, _ := strings.Cut(d.Addr(), ":")
	mustDo(ctx, t, seed, "CLUSTER", "MEET", host, port)
	n, closeN, err := node(ctx, d.Addr())
	if err != nil {
		t.Fatalf("dial node %s: %v", d.Addr(), err)
	}
	t.Cleanup(closeN)
	all := append(slices.Clone(addrs), d.Addr())
	stores := make([]store.Store, 0, len(all))
	for _, a := range addrs {
		s, closeS, err := node(ctx, a)
		if err != nil {
			t.Fatalf("dial node %s: %v", a, err)
		}
		defer closeS()
		stores = append(stores, s)
	}
	stores = append(stores, n)
	waitUntil(t, fmt.Sprintf("node %s to join the Cluster %v", d.Addr(), addrs), func() bool {
		for _, s := range stores {
			list, _ := store.String(nodeDo(ctx, t, s, "CLUSTER", "NODES").Val)
			info, _ := store.String(nodeDo(ctx, t, s, "CLUSTER", "INFO").Val)
			if strings.Count(list, " connected") < len(all) || strings.Contains(list, "handshake") || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
		}
		return true
	})
	return d.Addr(), n
}

// scaledOut proves, for each strategy, that a slot's migration to the last
// of nodes, which serves no slot and joined after st read the slot map, is
// followed: 2 calls counted before, then, with the subject's key moved (the
// source answers ASK), 3 of 4 calls admitted at 5 per day, by Redis. Every
// subject's slot starts migrating before any is decided, and Optimistic's
// are decided first, so that each strategy meets a node that owns no slot
// and, for the WATCH, one the client has not been led to by another call.
// The migrations end with the new node owning the slots.
func scaledOut(ctx context.Context, t testing.TB, addrs []string, nodes []store.Store, st store.Store, strategies []namedStrategy) {
	t.Helper()
	l := limiter.PerDay(5)
	ids := nodeIDs(ctx, t, nodes)
	to := len(nodes) - 1
	type run struct {
		namedStrategy
		lim     *limiter.Limiter
		subject string
		slot    int64
		phase   string
	}
	var runs []run
	for _, s := range slices.Backward(strategies) {
		lim, err := limiter.New(st, s.strategy, limiter.WithPrefix(s.prefix), limiter.WithFailMode(limiter.FailOpen))
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run{namedStrategy: s, lim: lim, subject: s.prefix + "-scaled"})
	}
	decide := func(r run, phase string, n, want int) {
		t.Helper()
		decideCalls(ctx, t, r.lim, r.name, phase, r.subject, n, want, l)
	}
	for i, r := range runs {
		decide(r, "before a node joined", 2, 2)
		key, err := limiter.Key(r.prefix, r.subject, l)
		if err != nil {
			t.Fatal(err)
		}
		if runs[i].slot, err = store.Int64(mustDo(ctx, t, nodes[0], "CLUSTER", "KEYSLOT", key).Val); err != nil {
			t.Fatal(err)
		}
		for _, o := range runs[:i] {
			if o.slot == runs[i].slot {
				t.Fatalf("%s and %s share slot %d", o.subject, r.subject, o.slot)
			}
		}
	}
	host, port, _ := strings.Cut(addrs[to], ":")
	for i, r := range runs {
		text, _ := store.String(mustDo(ctx, t, nodes[0], "CLUSTER", "NODES").Val)
		owner, err := redistest.SlotOwner(text, int(r.slot))
		if err != nil {
			t.Fatal(err)
		}
		from := slices.Index(ids, owner)
		if from < 0 || from == to {
			t.Fatalf("slot %d: its owner %s is not one of the first masters %v", r.slot, owner, ids[:to])
		}
		mustDo(ctx, t, nodes[to], "CLUSTER", "SETSLOT", r.slot, "IMPORTING", ids[from])
		mustDo(ctx, t, nodes[from], "CLUSTER", "SETSLOT", r.slot, "MIGRATING", ids[to])
		keys, _ := mustDo(ctx, t, nodes[from], "CLUSTER", "GETKEYSINSLOT", r.slot, 100).Val.([]any)
		if len(keys) == 0 {
			t.Fatalf("%s: CLUSTER GETKEYSINSLOT %d = %v; want the subject's key", r.name, r.slot, keys)
		}
		mustDo(ctx, t, nodes[from], append([]any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}, keys...)...)
		runs[i].phase = fmt.Sprintf("slot %d migrating from node %d to node %d, which joined the Cluster after the store read its slots (ASK)", r.slot, from, to)
	}
	for _, r := range runs {
		decide(r, r.phase, 4, 3)
	}
	for _, r := range runs {
		for _, n := range nodes {
			mustDo(ctx, t, n, "CLUSTER", "SETSLOT", r.slot, "NODE", ids[to])
		}
	}
}

// movedUnderWatch proves that a transaction whose key a slot's migration
// moved after its WATCH is store.ErrTxAborted, and ran nothing: the source
// refuses to queue a command on a key it no longer holds (ASK) and
// discards the transaction; the strategy is to watch the key again where
// it is now. So are reads the node refuses after the WATCH (ASK, MOVED),
// but not a read of another slot's key, which no new WATCH changes.
func movedUnderWatch(ctx context.Context, t testing.TB, addrs []string, nodes []store.Store, st store.Store, w store.Watcher) {
	t.Helper()
	one := func(n store.Store, args ...any) store.Reply { return mustDo(ctx, t, n, args...) }
	const key = "cw:{moved-under-watch}"
	if r := nodeDo(ctx, t, st, "SET", key, 1, "PX", 60000); r.Err != nil {
		t.Fatalf("SET %s: %v", key, r.Err)
	}
	slot, err := store.Int64(one(nodes[0], "CLUSTER", "KEYSLOT", key).Val)
	if err != nil {
		t.Fatal(err)
	}
	ids := nodeIDs(ctx, t, nodes)
	from := -1
	for i, n := range nodes {
		if r := nodeDo(ctx, t, n, "EXISTS", key); r.Err == nil && r.Val == int64(1) {
			from = i
		}
	}
	if from < 0 {
		t.Fatalf("%s is on no node", key)
	}
	to := (from + 1) % len(nodes)
	// migrateKey starts the slot's migration from node from to node to
	// and moves key; moved ends it, every node told of the slot's owner.
	migrateKey := func() {
		host, port, _ := strings.Cut(addrs[to], ":")
		one(nodes[to], "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[from])
		one(nodes[from], "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to])
		one(nodes[from], "MIGRATE", host, port, key, 0, 5000)
	}
	moved := func() {
		for _, n := range nodes {
			one(n, "CLUSTER", "SETSLOT", slot, "NODE", ids[to])
		}
	}
	var execErr error
	err = w.Watch(ctx, []string{key}, func(tx store.Tx) error {
		migrateKey()
		_, execErr = tx.Exec(ctx, store.Cmd{Name: "INCRBY", Args: []any{key, 1}})
		return execErr
	})
	moved()
	if !errors.Is(err, store.ErrTxAborted) {
		t.Errorf("a Watch whose key %s moved to another node after the WATCH = %v (its Exec: %v); want store.ErrTxAborted: the source refused to queue the INCRBY and ran nothing", key, err, execErr)
	}
	if v := one(nodes[to], "GET", key).Val; v != "1" {
		t.Errorf("GET %s on its new node = %v after the aborted transaction; want 1 (nothing ran)", key, v)
	}

	// The slot moves on after the WATCH, before the reads: the node
	// refuses them, with ASK while the slot migrates, with MOVED once it
	// has moved, and the transaction is to be watched again where the key
	// is now.
	for _, done := range []bool{false, true} {
		from, to = to, (to+1)%len(nodes)
		refusal := "ASK"
		if done {
			refusal = "MOVED"
		}
		var reads []store.Reply
		var readErr error
		err = w.Watch(ctx, []string{key}, func(tx store.Tx) error {
			migrateKey()
			if done {
				moved()
			}
			reads, readErr = tx.Do(ctx, store.Cmd{Name: "GET", Args: []any{key}})
			return readErr
		})
		moved()
		if !errors.Is(err, store.ErrTxAborted) {
			t.Errorf("a Watch whose key %s moved to another node after the WATCH, before its read (%s) = %v (its Do: %v, %v); want store.ErrTxAborted: the read was refused, and the key is to be watched again where it is now", key, refusal, err, reads, readErr)
		}
	}

	// A read of another slot's key, on another node, under the WATCH: the
	// node refuses it (MOVED), or the store before sending it, but the
	// watched slot did not move, and watching again would change nothing:
	// not store.ErrTxAborted.
	nodesReply, _ := store.String(one(nodes[0], "CLUSTER", "NODES").Val)
	var other string
	for i := 0; other == ""; i++ {
		k := fmt.Sprintf("cw:other-%d", i)
		s, err := store.Int64(one(nodes[0], "CLUSTER", "KEYSLOT", k).Val)
		if err != nil {
			t.Fatal(err)
		}
		if owner, err := redistest.SlotOwner(nodesReply, int(s)); err == nil && owner != ids[to] {
			other = k
		}
	}
	var reads []store.Reply
	err = w.Watch(ctx, []string{key}, func(tx store.Tx) error {
		var err error
		reads, err = tx.Do(ctx, store.Cmd{Name: "GET", Args: []any{other}})
		return err
	})
	if errors.Is(err, store.ErrTxAborted) {
		t.Errorf("a Watch of %s whose read is of %s, a key of another slot on another node = %v (its Do: %v); want its refusal, not store.ErrTxAborted: the watched slot did not move", key, other, err, reads)
	}
}

// watchLearnsMoves proves that a store.Watcher learns where a slot went:
// once a key's slot has moved to another node, of 10 Watches of the key,
// 100 ms apart, only the first 5 may meet the old node's MOVED. A store
// that follows each MOVED without learning from it sends every Watch of
// the slot to the old node first, one more round trip each, until its
// client reads the slot map again (a minute, for some clients).
func watchLearnsMoves(ctx context.Context, t testing.TB, addrs []string, nodes []store.Store, w store.Watcher) {
	t.Helper()
	one := func(n store.Store, args ...any) store.Reply { return mustDo(ctx, t, n, args...) }
	const key = "cw:{learns-moves}"
	watch := func() {
		t.Helper()
		if err := w.Watch(ctx, []string{key}, func(tx store.Tx) error {
			_, err := tx.Do(ctx, store.Cmd{Name: "GET", Args: []any{key}})
			return err
		}); err != nil {
			t.Fatalf("Watch of %s: %v", key, err)
		}
	}
	watch() // (the slot's node learned)
	slot := int(store.KeySlot(key))
	ids := nodeIDs(ctx, t, nodes)
	// A client may read the slot map again by itself (a refresh another
	// call began) between the move and the first Watch: then no Watch
	// meets the old node, and the move is made again, up to 3 times.
	var moves []string
	for range 3 {
		list, _ := store.String(one(nodes[0], "CLUSTER", "NODES").Val)
		owner, err := redistest.SlotOwner(list, slot)
		if err != nil {
			t.Fatal(err)
		}
		from := slices.Index(ids, owner)
		to := (from + 1) % len(nodes)
		one(nodes[to], "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[from])
		one(nodes[from], "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to])
		for _, n := range nodes {
			one(n, "CLUSTER", "SETSLOT", slot, "NODE", ids[to])
		}
		refusals := func() int {
			info, _ := store.String(one(nodes[from], "INFO", "errorstats").Val)
			n := 0
			for _, kind := range []string{"MOVED", "ASK"} {
				_, rest, ok := strings.Cut(info, "errorstat_"+kind+":count=")
				if ok {
					c, _ := strconv.Atoi(rest[:strings.IndexAny(rest, ",\r\n")])
					n += c
				}
			}
			return n
		}
		one(nodes[from], "CONFIG", "RESETSTAT")
		for range 5 {
			watch()
			time.Sleep(100 * time.Millisecond)
		}
		learning := refusals()
		for range 5 {
			watch()
			time.Sleep(100 * time.Millisecond)
		}
		n := refusals() - learning
		if n > 0 {
			t.Errorf("after slot %d of %s moved from %s to %s: the old node refused %d of the first 5 Watches of the key and %d of the next 5 (100 ms apart); want none after the store learned where the slot is", slot, key, addrs[from], addrs[to], learning, n)
			return
		}
		if learning > 0 {
			return
		}
		moves = append(moves, fmt.Sprintf("%s to %s", addrs[from], addrs[to]))
	}
	t.Errorf("slot %d of %s moved 3 times (%s): the old node refused none of the Watches after any move; want at least the first refused (the store's slot map was the old one)", slot, key, strings.Join(moves, ", "))
}

// migrating is MigratingSlot's run of one strategy, its subjects' keys
// under prefix, on the Cluster of nodes (at addrs) through st. It leaves no
// slot in migration.
func migrating(ctx context.Context, t testing.TB, addrs []string, nodes []store.Store, st store.Store, name, prefix string, strat limiter.Strategy) {
	t.Helper()
	one := func(n store.Store, args ...any) store.Reply { return mustDo(ctx, t, n, args...) }
	ids := nodeIDs(ctx, t, nodes)
	l := limiter.PerDay(5)
	// slotOf returns the slot of subject's key and the index of its node.
	slotOf := func(subject string) (int64, int) {
		key, err := limiter.Key(prefix, subject, l)
		if err != nil {
			t.Fatal(err)
		}
		slot, err := store.Int64(one(nodes[0], "CLUSTER", "KEYSLOT", key).Val)
		if err != nil {
			t.Fatal(err)
		}
		text, _ := store.String(one(nodes[0], "CLUSTER", "NODES").Val)
		id, err := redistest.SlotOwner(text, int(slot))
		if err != nil {
			t.Fatal(err)
		}
		for i := range ids {
			if ids[i] == id {
				return slot, i
			}
		}
		t.Fatalf("slot %d: its node %s is not among the masters %v", slot, id, ids)
		return 0, 0
	}
	lim, err := limiter.New(st, strat, limiter.WithPrefix(prefix), limiter.WithFailMode(limiter.FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	// decide makes n calls for subject at limits (l when none) and fails
	// t unless Redis decided each and admitted want of them.
	decide := func(phase, subject string, n, want int, limits ...limiter.Limit) {
		t.Helper()
		if len(limits) == 0 {
			limits = []limiter.Limit{l}
		}
		decideCalls(ctx, t, lim, name, phase, subject, n, want, limits...)
	}
	// Counted before anything moves: the client reads the slot map.
	decide("before the moves", prefix+"-moved", 3, 3)

	// A slot in migration, the subject's key on neither node yet: the
	// source answers ASK, the target counts.
	slot, from := slotOf(prefix + "-asked")
	to := (from + 1) % len(nodes)
	one(nodes[to], "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[from])
	one(nodes[from], "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to])
	decide(fmt.Sprintf("slot %d migrating from node %d to node %d (ASK)", slot, from, to), prefix+"-asked", 8, 5)

	// A slot moved with its keys: the client's map names the old node,
	// which answers MOVED.
	mslot, mfrom := slotOf(prefix + "-moved")
	mto := (mfrom + 1) % len(nodes)
	if mslot == slot {
		t.Fatalf("the subjects share slot %d", slot)
	}
	one(nodes[mto], "CLUSTER", "SETSLOT", mslot, "IMPORTING", ids[mfrom])
	one(nodes[mfrom], "CLUSTER", "SETSLOT", mslot, "MIGRATING", ids[mto])
	keys, _ := one(nodes[mfrom], "CLUSTER", "GETKEYSINSLOT", mslot, 100).Val.([]any)
	if len(keys) == 0 {
		t.Fatalf("CLUSTER GETKEYSINSLOT %d = %v; want the subject's key", mslot, keys)
	}
	host, port, _ := strings.Cut(addrs[mto], ":")
	migrate := append([]any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}, keys...)
	one(nodes[mfrom], migrate...)
	for _, n := range nodes {
		one(n, "CLUSTER", "SETSLOT", mslot, "NODE", ids[mto])
	}
	decide(fmt.Sprintf("slot %d moved from node %d to node %d (MOVED)", mslot, mfrom, mto), prefix+"-moved", 4, 2)

	// A batch beside the slot still in migration: the subject at its
	// limit is denied, fresh ones admitted, all by Redis.
	asks := []limiter.Ask{{Key: prefix + "-asked", Limits: []limiter.Limit{l}}}
	for i := range 6 {
		asks = append(asks, limiter.Ask{Key: fmt.Sprintf("%s-fresh-%d", prefix, i), Limits: []limiter.Limit{l}})
	}
	for i, d := range lim.AllowMany(ctx, asks) {
		if d.Err != nil || d.Result.Degraded || d.Result.Allowed != (i > 0) {
			t.Errorf("%s: AllowMany while slot %d migrates: %s at %s = %+v, %v; want decided by Redis: %s", name, slot, asks[i].Key, l, d.Result, d.Err, map[bool]string{true: "admitted", false: "denied (5 of 5 used)"}[i > 0])
		}
	}

	// A slot in migration with a subject's two keys split between its
	// nodes: the source answers TRYAGAIN to a call on both (one is gone,
	// the other not yet) until the migration moves the other, 300 ms
	// later, and ASK to a call on the one gone. Nothing ran, so the calls
	// wait for the move and are decided then, in their order.
	day := limiter.Limit{Rate: 50, Period: 7 * 24 * time.Hour} // (a week)
	dayKey := func(subject string) string {
		k, err := limiter.Key(prefix, subject, l)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	// split starts the migration of subject's slot with its day key
	// moved, and moves the rest 300 ms later; the phase's name, and a
	// channel that reports the end of the move.
	split := func(subject string) (string, chan error) {
		t.Helper()
		sslot, sfrom := slotOf(subject)
		sto := (sfrom + 1) % len(nodes)
		if sslot == slot || sslot == mslot {
			t.Fatalf("the subjects share slot %d", sslot)
		}
		keys, _ := one(nodes[sfrom], "CLUSTER", "GETKEYSINSLOT", sslot, 100).Val.([]any)
		// (the day's key, or for a strategy that names each window,
		// its window's key)
		base := dayKey(subject)
		i := slices.IndexFunc(keys, func(k any) bool {
			s, _ := k.(string)
			return s == base || strings.HasPrefix(s, base+":")
		})
		if len(keys) != 2 || i < 0 {
			t.Fatalf("%s: CLUSTER GETKEYSINSLOT %d = %v; want the 2 keys of %s, %s among them", name, sslot, keys, subject, base)
		}
		hk := keys[i]
		host, port, _ := strings.Cut(addrs[sto], ":")
		one(nodes[sto], "CLUSTER", "SETSLOT", sslot, "IMPORTING", ids[sfrom])
		one(nodes[sfrom], "CLUSTER", "SETSLOT", sslot, "MIGRATING", ids[sto])
		one(nodes[sfrom], "MIGRATE", host, port, hk, 0, 5000)
		rest := keys[0]
		if rest == hk {
			rest = keys[1]
		}
		moved := make(chan error, 1)
		go func() {
			time.Sleep(300 * time.Millisecond)
			// (not one: t.Fatal belongs to the test's goroutine)
			do := func(n store.Store, args ...any) error {
				rs, err := n.Do(ctx, store.Cmd{Name: args[0].(string), Args: args[1:]})
				if err == nil {
					err = rs[0].Err
				}
				if err != nil {
					return fmt.Errorf("moving the rest of slot %d: %v: %w", sslot, args, err)
				}
				return nil
			}
			err := do(nodes[sfrom], "MIGRATE", host, port, rest, 0, 5000)
			for _, n := range nodes {
				if err == nil {
					err = do(n, "CLUSTER", "SETSLOT", sslot, "NODE", ids[sto])
				}
			}
			moved <- err
		}()
		return fmt.Sprintf("slot %d migrating from node %d to node %d, %s moved and %s not yet (TRYAGAIN)", sslot, sfrom, sto, hk, rest), moved
	}
	wait := func(moved chan error) {
		t.Helper()
		if err := <-moved; err != nil {
			t.Fatal(err)
		}
	}
	// One by one: 2 counted before, 3 of 5 during the split.
	decide("before the split", prefix+"-split", 2, 2, l, day)
	phase, moved := split(prefix + "-split")
	// A Peek reads both keys: one on each node (a script or a transaction
	// waits for the move; a pipeline of reads follows the ASK of the
	// moved key's).
	if r, err := lim.Peek(ctx, prefix+"-split", l, day); err != nil || r.Degraded || !r.Allowed || r.Remaining != 3 {
		t.Errorf("%s: Peek while %s = %+v, %v; want 3 of 5 left, read by Redis", name, phase, r, err)
	}
	decide(phase, prefix+"-split", 5, 3, l, day)
	wait(moved)

	// In an AllowMany: the subject has 1 of 5 left; its first ask (both
	// keys: TRYAGAIN) takes it, its second (the day key alone: ASK,
	// which the client may follow at once) is denied; a fresh subject is
	// admitted.
	decide("before the split", prefix+"-split-many", 4, 4, l, day)
	phase, moved = split(prefix + "-split-many")
	asks = []limiter.Ask{
		{Key: prefix + "-split-many", Limits: []limiter.Limit{l, day}},
		{Key: prefix + "-split-many", Limits: []limiter.Limit{l}},
		{Key: prefix + "-fresh-split", Limits: []limiter.Limit{l, day}},
	}
	for i, d := range lim.AllowMany(ctx, asks) {
		if want := i != 1; d.Err != nil || d.Result.Degraded || d.Result.Allowed != want {
			t.Errorf("%s: AllowMany while %s: ask %d, %s at %v = %+v, %v; want %s by Redis", name, phase, i+1, asks[i].Key, asks[i].Limits, d.Result, d.Err, map[bool]string{true: "admitted", false: "denied (5 of 5 used by the ask before it)"}[want])
		}
	}
	wait(moved)

	// A Reset: its DEL of the subject's two keys is refused (TRYAGAIN)
	// until the move, and deletes them then; the subject has its 5 back.
	decide("before the split", prefix+"-split-reset", 5, 5, l, day)
	phase, moved = split(prefix + "-split-reset")
	if err := lim.Reset(ctx, prefix+"-split-reset", l, day); err != nil {
		t.Errorf("%s: Reset while %s: %v; want the keys deleted once the slot has moved", name, phase, err)
	}
	wait(moved)
	decide("after a Reset during the split", prefix+"-split-reset", 6, 5, l, day)

	// A subject with two limits, new, whose slot is migrating with no keys
	// in it: the source answers ASK (it holds none of the keys), the
	// target TRYAGAIN (it holds not all of them) until the migration ends,
	// 300 ms later. Nothing ran: the call waits, and is decided then.
	fresh := prefix + "-fresh-two"
	fslot, ffrom := slotOf(fresh)
	fto := (ffrom + 1) % len(nodes)
	if fslot == slot {
		t.Fatalf("the subjects share slot %d", fslot)
	}
	one(nodes[fto], "CLUSTER", "SETSLOT", fslot, "IMPORTING", ids[ffrom])
	one(nodes[ffrom], "CLUSTER", "SETSLOT", fslot, "MIGRATING", ids[fto])
	ended := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		var err error
		for _, n := range nodes {
			if err == nil {
				var rs []store.Reply
				if rs, err = n.Do(ctx, store.Cmd{Name: "CLUSTER", Args: []any{"SETSLOT", fslot, "NODE", ids[fto]}}); err == nil {
					err = rs[0].Err
				}
			}
		}
		ended <- err
	}()
	decide(fmt.Sprintf("slot %d migrating from node %d to node %d with no keys, a new subject with two limits (ASK, then TRYAGAIN)", fslot, ffrom, fto), fresh, 1, 1, l, day)
	wait(ended)

	// The first slot's migration ends: its keys are on the target.
	for _, n := range nodes {
		one(n, "CLUSTER", "SETSLOT", slot, "NODE", ids[to])
	}
}

// mustDo sends one command to n and returns its reply; a failed round trip
// or an error reply fails t.
func mustDo(ctx context.Context, t testing.TB, n store.Store, args ...any) store.Reply {
	t.Helper()
	r := nodeDo(ctx, t, n, args...)
	if r.Err != nil {
		t.Fatalf("%v: %v", args, r.Err)
	}
	return r
}

// decideCalls makes n calls of lim for subject at limits and fails t
// unless Redis decided each (no error, not Degraded) and admitted want of
// them; name and phase say which strategy and step in the messages.
func decideCalls(ctx context.Context, t testing.TB, lim *limiter.Limiter, name, phase, subject string, n, want int, limits ...limiter.Limit) {
	t.Helper()
	admitted := 0
	for i := range n {
		r, err := lim.Allow(ctx, subject, limits...)
		if err != nil || r.Degraded {
			t.Errorf("%s: %s: call %d of %s at %v = %+v, %v; want decided by Redis", name, phase, i+1, subject, limits, r, err)
			return
		}
		if r.Allowed {
			admitted++
		}
	}
	if admitted != want {
		t.Errorf("%s: %s: %d of %d calls of %s at %v admitted; want %d", name, phase, admitted, n, subject, limits, want)
	}
}

// decideMany asks lim for n units of subject at l in one AllowMany (n asks
// of 1) and fails t unless Redis decided each (no error, not Degraded) and
// admitted want of them; name and phase say which strategy and step.
func decideMany(ctx context.Context, t testing.TB, lim *limiter.Limiter, name, phase, subject string, n, want int, l limiter.Limit) {
	t.Helper()
	asks := make([]limiter.Ask, n)
	for i := range asks {
		asks[i] = limiter.Ask{Key: subject, Limits: []limiter.Limit{l}}
	}
	admitted := 0
	for i, a := range lim.AllowMany(ctx, asks) {
		if a.Err != nil || a.Result.Degraded {
			t.Errorf("%s: %s: ask %d of %d for %s at %v = %+v, %v; want decided by Redis", name, phase, i+1, n, subject, l, a.Result, a.Err)
			return
		}
		if a.Result.Allowed {
			admitted++
		}
	}
	if admitted != want {
		t.Errorf("%s: %s: %d of %d asks for %s at %v admitted; want %d", name, phase, admitted, n, subject, l, want)
	}
}

// nodeIDs returns the Cluster node ID of each of nodes.
func nodeIDs(ctx context.Context, t testing.TB, nodes []store.Store) []string {
	t.Helper()
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i], _ = store.String(mustDo(ctx, t, n, "CLUSTER", "MYID").Val)
	}
	return ids
}
