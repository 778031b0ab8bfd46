package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
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
// Redis: a script (FixedWindow), MULTI/EXEC transactions (Bucketed), WATCH
// with MULTI/EXEC (Optimistic) and a batch of scripts (FixedWindow's
// AllowMany), each through a store of its own from cluster. A node joins
// the Cluster after the stores read its slot map, as a replica of the
// master of each strategy's subject. At 5 per day under FailOpen, 2 calls
// (asks) are counted before the failover; 1 is made as it starts (it runs
// before the switch, or the master holds it until the replica has taken
// over and answers MOVED); once the old master has become its replica's
// replica, 2 of 3 are admitted. Then the Cluster fails back while an
// Optimistic call's transaction is between its reads and its EXEC, and
// over again while one is between its WATCH and its reads: the demoted
// master refuses the writes (or the reads) with MOVED, and the call,
// watched again on the new master, is admitted, with 4 of the next 5
// (counted once). It fails back and over once more inside the WATCH
// transactions that give a quota lease's unused units back (ReturnLeases),
// Bucketed's before its reads and Optimistic's before its EXEC, each from
// a leased limiter (units 2) that took a lease before the failovers and
// used 1 of it: the unused unit comes back once, and 4 of the next 5 calls
// are admitted. Beside them, through a store each, every entry point of
// every strategy makes its first call after the switch on the demoted
// master: Allow with one limit and with two, Peek, Reset (with and without
// a deny cache), Wait, AllowMany and a rules.Limiter, for FixedWindow,
// Bucketed, Optimistic, GCRA, TokenBucket, SlidingWindow, SlidingLog and
// AlignedWindow; quota leases' ReturnLeases, a leased Allow and Reset; and
// a concurrency lease's Release, Acquire and Extend. Each call is decided
// by Redis (never Degraded, never an error) and the counts after it are
// exact: the new master holds every count, and each store, meeting the
// demoted master at least once, followed its MOVED to a node the store had
// not met.
//
// A store that gives MOVED as the call's error, or keeps sending a slot's
// calls to the demoted master, admits them uncounted under FailOpen
// (denies them under FailClosed); so does a store.Watcher whose Tx.Do
// gives a read's MOVED as its reply, not as store.ErrTxAborted (and the
// quota return, taking the reply for a counter it cannot read, quietly
// gives nothing back). node connects a single-node store of the same
// adapter to a node. It is not in StoreChecks because it changes the
// Cluster's masters: it never runs on a Cluster it did not start.
func FailingOver(t testing.TB, cluster ClusterDialer, node Dialer) {
	t.Helper()
	clearOfDayEnd(t, 4*time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	addrs, nodes := ownCluster(ctx, t, node)
	l := limiter.PerDay(5)
	ids := nodeIDs(ctx, t, nodes)
	const from = 1 // the master that fails over
	slots, _ := store.String(mustDo(ctx, t, nodes[0], "CLUSTER", "NODES").Val)
	next := 0
	// subjectOn returns a new subject whose keys under prefix are on the
	// master that fails over.
	subjectOn := func(prefix string) string {
		for ; ; next++ {
			subject := fmt.Sprintf("%s-failover-%d", prefix, next)
			key, err := limiter.Key(prefix, subject, l)
			if err != nil {
				t.Fatal(err)
			}
			if owner, err := redistest.SlotOwner(slots, int(store.KeySlot(key))); err == nil && owner == ids[from] {
				next++
				return subject
			}
		}
	}
	// dial connects a store of its own, whose slot map no other
	// strategy's calls bring up to date: each meets the demoted master.
	dial := func() store.Store {
		st, closeSt, err := cluster(ctx, addrs)
		if err != nil {
			t.Fatalf("dial cluster: %v", err)
		}
		t.Cleanup(closeSt)
		return st
	}
	type run struct {
		name     string
		lim      *limiter.Limiter
		subjects []string // on the slots of master from
		many     bool     // decided in one AllowMany
	}
	var (
		runs   []run
		paused *pausingWatcher // Optimistic's store
	)
	for _, s := range []namedStrategy{
		{"FixedWindow", "ft", strategy.NewFixedWindow()},
		{"Bucketed", "fb", strategy.NewBucketed()},
		{"Optimistic", "fo", strategy.NewOptimistic()},
		{"FixedWindow's AllowMany", "fm", strategy.NewFixedWindow()},
	} {
		st := dial()
		if w, ok := st.(store.Watcher); ok && s.name == "Optimistic" {
			paused = &pausingWatcher{Store: st, w: w}
			st = paused
		}
		lim, err := limiter.New(st, s.strategy, limiter.WithPrefix(s.prefix), limiter.WithFailMode(limiter.FailOpen))
		if err != nil {
			t.Fatal(err)
		}
		r := run{name: s.name, lim: lim, many: s.prefix == "fm"}
		for range 3 {
			r.subjects = append(r.subjects, subjectOn(s.prefix))
		}
		runs = append(runs, r)
	}
	entries := entryProbes(ctx, t, l, dial, subjectOn)
	// Quota returns through a WATCH transaction, each from a leased
	// limiter (units 2) whose store pauses inside it, with a plain
	// limiter beside it that counts what the return left.
	type quotaReturn struct {
		name          string
		p             *pausingWatcher
		leased, plain *limiter.Limiter
		subject       string
	}
	var returns []quotaReturn
	for _, s := range []namedStrategy{
		{"Bucketed ReturnLeases", "rb", strategy.NewBucketed()},
		{"Optimistic ReturnLeases", "ro", strategy.NewOptimistic()},
	} {
		st := dial()
		w, ok := st.(store.Watcher)
		if !ok {
			break
		}
		r := quotaReturn{name: s.name, p: &pausingWatcher{Store: st, w: w}, subject: subjectOn(s.prefix)}
		var err error
		if r.leased, err = limiter.New(r.p, s.strategy, limiter.WithPrefix(s.prefix), limiter.WithFailMode(limiter.FailOpen), limiter.WithQuotaLease(2)); err != nil {
			t.Fatal(err)
		}
		if r.plain, err = limiter.New(dial(), s.strategy, limiter.WithPrefix(s.prefix), limiter.WithFailMode(limiter.FailOpen)); err != nil {
			t.Fatal(err)
		}
		returns = append(returns, r)
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
		if !r.many {
			decideCalls(ctx, t, r.lim, r.name, phase, r.subjects[0], n, want, l)
			return
		}
		decideMany(ctx, t, r.lim, r.name, phase, r.subjects[0], n, want, l)
	}
	for _, r := range runs {
		decide(r, "before the failover", 2, 2)
	}
	for _, e := range entries {
		e.before()
	}
	for _, r := range returns {
		decideCalls(ctx, t, r.leased, r.name, "before the failover (a lease of 2 taken)", r.subject, 1, 1, l)
	}
	mustDo(ctx, t, replica, "CLUSTER", "FAILOVER")
	for _, r := range runs {
		decide(r, "as the master's replica takes over (CLUSTER FAILOVER)", 1, 1)
	}
	tookOver := func(master, demoted store.Store) bool {
		mine, _ := store.String(nodeDo(ctx, t, master, "INFO", "replication").Val)
		old, _ := store.String(nodeDo(ctx, t, demoted, "INFO", "replication").Val)
		return strings.Contains(mine, "role:master") && strings.Contains(old, "role:slave")
	}
	waitUntil(t, fmt.Sprintf("%s to take over from %s", addr, addrs[from]), func() bool { return tookOver(replica, nodes[from]) })
	for _, r := range runs {
		decide(r, "after the failover (the demoted master answers MOVED)", 3, 2)
	}
	for _, e := range entries {
		e.after()
	}
	if paused == nil {
		return
	}

	// Transactions inside which the Cluster fails back and over again:
	// Optimistic's Allow, whose store now sends the slot's WATCH to the new
	// master, then the quota returns of Bucketed and Optimistic (a WATCH
	// transaction each), from a leased limiter whose store has not met the
	// slot's new master. Each failover runs after the transaction's reads,
	// before its EXEC (the demoted master refuses to queue the writes:
	// nothing runs), or after its WATCH, before its reads (the demoted
	// master answers MOVED to them). Each is an aborted transaction,
	// watched again on the slot's new master: the call is decided by Redis
	// and counted once, the units returned once.
	o := runs[slices.IndexFunc(runs, func(r run) bool { return r.name == "Optimistic" })]
	steps := []txFailover{
		{beforeExec: true, p: paused, name: o.name,
			call:  func(phase string) { decideCalls(ctx, t, o.lim, o.name, phase, o.subjects[1], 1, 1, l) },
			after: func(phase string) { decideCalls(ctx, t, o.lim, o.name, phase, o.subjects[1], 5, 4, l) }},
		{beforeExec: false, p: paused, name: o.name,
			call:  func(phase string) { decideCalls(ctx, t, o.lim, o.name, phase, o.subjects[2], 1, 1, l) },
			after: func(phase string) { decideCalls(ctx, t, o.lim, o.name, phase, o.subjects[2], 5, 4, l) }},
	}
	for i, r := range returns {
		steps = append(steps, txFailover{beforeExec: i%2 == 1, p: r.p, name: r.name,
			call: func(phase string) {
				// the lease of 2 taken before the failovers, 1 of it used
				if n, err := r.leased.ReturnLeases(ctx, 0); err != nil || n != 1 {
					t.Errorf("%s: %s: ReturnLeases = %d, %v; want 1 unit given back, nil", r.name, phase, n, err)
				}
			},
			after: func(phase string) { decideCalls(ctx, t, r.plain, r.name, phase, r.subject, 5, 4, l) }})
	}
	for i, step := range steps {
		// the old master and its replica take turns: the replica is
		// master after the first failover
		master, demoted := nodes[from], replica
		if i%2 == 1 {
			master, demoted = replica, nodes[from]
		}
		var hookErr error
		ran := false
		step.p.arm(step.beforeExec, func(ctx context.Context) {
			ran = true
			hookErr = failOver(ctx, master, demoted, tookOver)
		})
		phase := "a failover after its WATCH, before its reads"
		if step.beforeExec {
			phase = "a failover after its reads, before its EXEC"
		}
		step.call(phase)
		if !ran {
			t.Fatalf("%s: %s: the transaction never reached that point", step.name, phase)
		}
		if hookErr != nil {
			t.Fatalf("%s: %s: %v", step.name, phase, hookErr)
		}
		step.after("after " + phase)
	}
}

// txFailover is a failover FailingOver runs inside a transaction: call's,
// through p's store, before its EXEC or before its reads; after checks the
// counts after it.
type txFailover struct {
	beforeExec  bool
	p           *pausingWatcher
	name        string
	call, after func(phase string)
}

// failOver runs CLUSTER FAILOVER on the replica promoted and waits until
// it is master and demoted its replica, for up to 30 s. A master votes for
// a replica of the same master once per two node timeouts, so a failover
// soon after another one is refused: one that has not taken over in 5 s
// (when the replica gives it up) is asked for again.
func failOver(ctx context.Context, promoted, demoted store.Store, tookOver func(master, demoted store.Store) bool) error {
	var asked time.Time
	for deadline := time.Now().Add(30 * time.Second); !tookOver(promoted, demoted); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return errors.New("waited 30 s for the replica to take over")
		}
		if time.Since(asked) < 5*time.Second {
			continue
		}
		asked = time.Now()
		rs, err := promoted.Do(ctx, store.Cmd{Name: "CLUSTER", Args: []any{"FAILOVER"}})
		if err == nil {
			err = rs[0].Err
		}
		if err != nil {
			return fmt.Errorf("CLUSTER FAILOVER: %w", err)
		}
	}
	return nil
}

// pausingWatcher is a store whose Watch runs a hook once inside the
// transaction, when armed: before the transaction's first read (after the
// WATCH) or before its EXEC (after the reads).
type pausingWatcher struct {
	store.Store
	w store.Watcher

	mu         sync.Mutex
	hook       func(context.Context)
	beforeExec bool
}

// arm sets the hook the next transaction runs, once.
func (p *pausingWatcher) arm(beforeExec bool, hook func(context.Context)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hook, p.beforeExec = hook, beforeExec
}

// take returns the hook armed for that point and disarms it, or nil.
func (p *pausingWatcher) take(exec bool) func(context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.hook
	if h == nil || p.beforeExec != exec {
		return nil
	}
	p.hook = nil
	return h
}

// Watch implements store.Watcher.
func (p *pausingWatcher) Watch(ctx context.Context, keys []string, fn func(store.Tx) error) error {
	return p.w.Watch(ctx, keys, func(tx store.Tx) error { return fn(pausedTx{tx, p}) })
}

// pausedTx is a pausingWatcher's transaction.
type pausedTx struct {
	store.Tx
	p *pausingWatcher
}

// Do implements store.Tx.
func (x pausedTx) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if h := x.p.take(false); h != nil {
		h(ctx)
	}
	return x.Tx.Do(ctx, cmds...)
}

// Exec implements store.Tx.
func (x pausedTx) Exec(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if h := x.p.take(true); h != nil {
		h(ctx)
	}
	return x.Tx.Exec(ctx, cmds...)
}

// clearOfDayEnd waits, when less than need is left of the current UTC day,
// until the next day has begun. The Cluster checks count calls at limits
// per day, on servers they start on this machine's clock, and the
// epoch-aligned strategies (Bucketed, AlignedWindow, SlidingWindow) start
// new windows at midnight UTC: a check running across it would see counts
// start again midway.
func clearOfDayEnd(t testing.TB, need time.Duration) {
	t.Helper()
	const day = 24 * time.Hour
	if left := day - time.Duration(time.Now().UnixNano()%int64(day)); left < need {
		t.Logf("waiting %s for the next UTC day, so that no window ends during the check", left.Round(time.Millisecond))
		time.Sleep(left + 100*time.Millisecond)
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
