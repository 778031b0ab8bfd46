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
	msgs := failsOnlyWithoutRedirections(t, MigratingSlot)
	for _, s := range []string{"FixedWindow", "Bucketed", "Optimistic"} {
		for _, phase := range []string{"(ASK): call 1", "(MOVED): call 1"} {
			if !slices.ContainsFunc(msgs, func(m string) bool {
				return strings.HasPrefix(m, s+": slot ") && strings.Contains(m, phase) && strings.Contains(m, "want decided by Redis")
			}) {
				t.Errorf("%s failed without saying that its calls %s were not decided: %s", s, phase, strings.Join(msgs, " | "))
			}
		}
	}
}

// failsOnlyWithoutRedirections runs check with go-redis Cluster stores
// that follow MOVED and ASK (MaxRedirects 0, go-redis's 3), where it must
// pass, and with stores that follow none (MaxRedirects -1), where it must
// fail; it returns the failing run's messages.
func failsOnlyWithoutRedirections(t *testing.T, check func(testing.TB, ClusterDialer, Dialer)) []string {
	t.Helper()
	var failed []string
	for _, tc := range []struct {
		name      string
		redirects int
		pass      bool
	}{{"MaxRedirects 0 (3)", 0, true}, {"MaxRedirects -1", -1, false}} {
		o := record(context.Background(), func(r testing.TB) { check(r, goredisCluster(tc.redirects), goredisNode) })
		msgs := strings.Join(o.Messages, " | ")
		if o.Skipped {
			t.Fatalf("%s: skipped: %s", tc.name, msgs)
		}
		if o.Passed != tc.pass {
			t.Errorf("%s: passed=%v, want %v: %s", tc.name, o.Passed, tc.pass, msgs)
		}
		if !tc.pass {
			failed = o.Messages
		}
	}
	return failed
}

// goredisNode connects a go-redis store to one node.
func goredisNode(_ context.Context, addr string) (store.Store, func(), error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	return goredis.New(rdb), func() { _ = rdb.Close() }, nil
}

// goredisCluster connects go-redis Cluster stores with MaxRedirects set to
// redirects. One that follows none (-1) learns nothing either: its slot
// map is the one it read first. (go-redis reads the map again in the
// background after each MOVED or ASK it meets, and on a loaded machine
// such a read, begun by a step's ASKs, may land after the next step's
// move: its call then finds the slot's new owner, and the control passes
// a step it is there to fail.)
func goredisCluster(redirects int) ClusterDialer {
	return func(_ context.Context, addrs []string) (store.Store, func(), error) {
		opt := &redis.ClusterOptions{Addrs: addrs, MaxRedirects: redirects}
		if redirects < 0 {
			var once sync.Once
			var slots []redis.ClusterSlot
			var err error
			opt.ClusterSlots = func(ctx context.Context) ([]redis.ClusterSlot, error) {
				once.Do(func() {
					c := redis.NewClient(&redis.Options{Addr: addrs[0]})
					defer c.Close()
					slots, err = c.ClusterSlots(ctx).Result()
				})
				return slots, err
			}
		}
		rdb := redis.NewClusterClient(opt)
		return goredis.New(rdb), func() { _ = rdb.Close() }, nil
	}
}

// TestFailingOverFailsWithoutRedirections: FailingOver fails a Cluster
// client that does not follow MOVED (go-redis with MaxRedirects -1): the
// call the demoted master answers MOVED is admitted Degraded, uncounted,
// for each way a strategy reaches Redis (AllowMany's batch too); with
// redirections followed it passes.
func TestFailingOverFailsWithoutRedirections(t *testing.T) {
	msgs := failsOnlyWithoutRedirections(t, FailingOver)
	for _, s := range []string{"FixedWindow", "Bucketed", "Optimistic", "FixedWindow's AllowMany"} {
		if !slices.ContainsFunc(msgs, func(m string) bool {
			return strings.HasPrefix(m, s+": ") && strings.Contains(m, "want decided by Redis")
		}) {
			t.Errorf("%s failed without saying that a call was not decided by Redis: %s", s, strings.Join(msgs, " | "))
		}
	}
	// every entry point's first call after the failover meets the MOVED
	for _, e := range failoverEntries() {
		if !slices.ContainsFunc(msgs, func(m string) bool { return strings.HasPrefix(m, e+": after the failover") }) {
			t.Errorf("entry point %q did not fail: %s", e, strings.Join(msgs, " | "))
		}
	}
}

// TestReadRefusalsFail: MigratingSlot and FailingOver fail a
// store.Watcher whose transaction gives a read's refusal for a slot that
// moved after the WATCH (MOVED, ASK) as the read's reply rather than as
// store.ErrTxAborted: the read fails the decision, which FailOpen admits
// Degraded, uncounted, instead of watching the keys again where they are.
// MigratingSlot fails one that gives every refusal as store.ErrTxAborted,
// that of a read of another slot's key too, which no new WATCH changes.
// FailingOver fails one whose EXEC, refused because the slot moved after
// the reads, is a plain error rather than store.ErrTxAborted, at an
// Optimistic decision and at a quota return.
func TestReadRefusalsFail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		check  func(testing.TB, ClusterDialer, Dialer)
		tx     func(store.Tx) store.Tx
		wanted []string
	}{
		{"MigratingSlot, refusals as replies", MigratingSlot, asReplies, []string{"before its read (ASK)", "before its read (MOVED)"}},
		{"FailingOver, refusals as replies", FailingOver, asReplies, []string{"Optimistic: a failover after its WATCH, before its reads: call 1", "Bucketed ReturnLeases: a failover after its WATCH, before its reads: ReturnLeases = 0"}},
		{"MigratingSlot, every refusal aborts", MigratingSlot, abortsOnRefusal, []string{"a key of another slot on another node"}},
		{"FailingOver, an aborted EXEC as an error", FailingOver, execAbortAsError, []string{"Optimistic: a failover after its reads, before its EXEC: call 1", "Optimistic ReturnLeases: a failover after its reads, before its EXEC: ReturnLeases = 0"}},
	} {
		dial := func(ctx context.Context, addrs []string) (store.Store, func(), error) {
			rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
			return txWrapper{goredis.New(rdb), tc.tx}, func() { _ = rdb.Close() }, nil
		}
		o := record(context.Background(), func(r testing.TB) { tc.check(r, dial, goredisNode) })
		msgs := strings.Join(o.Messages, " | ")
		if o.Skipped || o.Passed {
			t.Errorf("%s: skipped=%v passed=%v; want failed: %s", tc.name, o.Skipped, o.Passed, msgs)
			continue
		}
		for _, w := range tc.wanted {
			if !strings.Contains(msgs, w) {
				t.Errorf("%s failed without a message on %q: %s", tc.name, w, msgs)
			}
		}
	}
}

// txWrapper is a go-redis Cluster store whose transactions are wrapped.
type txWrapper struct {
	*goredis.Store
	wrap func(store.Tx) store.Tx
}

func (s txWrapper) Watch(ctx context.Context, keys []string, fn func(store.Tx) error) error {
	return s.Store.Watch(ctx, keys, func(tx store.Tx) error { return fn(s.wrap(tx)) })
}

// asReplies wraps a transaction whose Tx.Do gives a refused read
// (store.ErrTxAborted) as each command's reply, with no error.
func asReplies(tx store.Tx) store.Tx { return repliedTx{tx} }

type repliedTx struct{ store.Tx }

func (x repliedTx) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	rs, err := x.Tx.Do(ctx, cmds...)
	if !errors.Is(err, store.ErrTxAborted) {
		return rs, err
	}
	rs = make([]store.Reply, len(cmds))
	for i := range rs {
		rs[i].Err = errors.New(err.Error()) // the refusal, not ErrTxAborted
	}
	return rs, nil
}

// execAbortAsError wraps a transaction whose Tx.Exec gives an EXEC that
// was refused (store.ErrTxAborted: EXECABORT, the demoted master having
// refused to queue the writes) as a plain error.
func execAbortAsError(tx store.Tx) store.Tx { return execErrTx{tx} }

type execErrTx struct{ store.Tx }

func (x execErrTx) Exec(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	rs, err := x.Tx.Exec(ctx, cmds...)
	if errors.Is(err, store.ErrTxAborted) {
		err = errors.New(err.Error())
	}
	return rs, err
}

// abortsOnRefusal wraps a transaction whose Tx.Do gives any command's
// MOVED or ASK as store.ErrTxAborted, whatever the command's slot.
func abortsOnRefusal(tx store.Tx) store.Tx { return abortingTx{tx} }

type abortingTx struct{ store.Tx }

func (x abortingTx) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	rs, err := x.Tx.Do(ctx, cmds...)
	for _, r := range rs {
		if r.Err != nil && (strings.Contains(r.Err.Error(), "MOVED ") || strings.Contains(r.Err.Error(), "ASK ")) {
			return nil, fmt.Errorf("%w: %w", store.ErrTxAborted, r.Err)
		}
	}
	return rs, err
}

// TestWatchLearnsMovesFailsAStoreThatNeverLearns: watchLearnsMoves fails a
// store.Watcher that is go-redis's ClusterClient.Watch alone, which follows
// a WATCH's MOVED without updating its slot map: every Watch of the moved
// slot goes to the old node first.
func TestWatchLearnsMovesFailsAStoreThatNeverLearns(t *testing.T) {
	o := record(context.Background(), func(r testing.TB) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		addrs, nodes := ownCluster(ctx, r, goredisNode)
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		defer cc.Close()
		watchLearnsMoves(ctx, r, addrs, nodes, plainWatch{cc})
	})
	msgs := strings.Join(o.Messages, " | ")
	if o.Skipped || o.Passed || !strings.Contains(msgs, "none after the store learned") {
		t.Errorf("skipped=%v passed=%v; want failed, the old node refusing the later Watches: %s", o.Skipped, o.Passed, msgs)
	}
}

// plainWatch is go-redis's ClusterClient.Watch as a store.Watcher, with
// reads only.
type plainWatch struct{ cc *redis.ClusterClient }

func (p plainWatch) Watch(ctx context.Context, keys []string, fn func(store.Tx) error) error {
	return p.cc.Watch(ctx, func(tx *redis.Tx) error { return fn(plainTx{tx}) }, keys...)
}

type plainTx struct{ tx *redis.Tx }

func (x plainTx) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	out := make([]store.Reply, len(cmds))
	for i, c := range cmds {
		cmd := redis.NewCmd(ctx, append([]any{c.Name}, c.Args...)...)
		_ = x.tx.Process(ctx, cmd)
		out[i].Val, out[i].Err = cmd.Result()
		if errors.Is(out[i].Err, redis.Nil) {
			out[i].Err = store.ErrNil
		}
	}
	return out, nil
}

func (x plainTx) Exec(context.Context, ...store.Cmd) ([]store.Reply, error) {
	return nil, errors.New("plainTx: no transactions")
}
