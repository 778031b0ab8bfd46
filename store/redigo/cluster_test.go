package redigo_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/redigo"
	"github.com/quotagate/limiter/strategy"
)

// newCluster is the redisc set-up the package documentation recommends.
func newCluster(t *testing.T, addrs []string) *redisc.Cluster {
	t.Helper()
	c := clusterFor(addrs)
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Refresh(); err != nil {
		t.Fatal(err)
	}
	return c
}

// clusterFor returns a redisc cluster of addrs, not yet refreshed.
func clusterFor(addrs []string) *redisc.Cluster {
	nd := &net.Dialer{Timeout: time.Second, KeepAlive: time.Minute}
	return &redisc.Cluster{
		StartupNodes: addrs,
		DialOptions: []redis.DialOption{
			redis.DialConnectTimeout(time.Second),
			redis.DialReadTimeout(time.Second),
			redis.DialWriteTimeout(time.Second),
		},
		CreatePool: func(addr string, opts ...redis.DialOption) (*redis.Pool, error) {
			return &redis.Pool{
				DialContext: func(ctx context.Context) (redis.Conn, error) {
					return redigo.Dial(ctx, nd, "tcp", addr, opts...)
				},
				TestOnBorrow: redigo.TestOnBorrow,
				MaxActive:    16,
				MaxIdle:      16,
				Wait:         true,
				IdleTimeout:  time.Minute,
			}, nil
		},
		PoolWaitTime: time.Second,
	}
}

// node runs cmd on the node at addr itself.
func node(t *testing.T, addr, cmd string, args ...any) any {
	t.Helper()
	c, err := redis.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v, err := c.Do(cmd, args...)
	if err != nil {
		t.Fatalf("%s %s %v: %v", addr, cmd, args, err)
	}
	return v
}

func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	st := redigo.New(redigo.Cluster(newCluster(t, cl.Addrs()[:1])))
	ctx := context.Background()
	lim, err := limiter.New(st, strategy.NewFixedWindow())
	if err != nil {
		t.Fatal(err)
	}
	ls := []limiter.Limit{limiter.PerMinute(10), limiter.PerHour(100)}
	for i := range 30 { // subjects on every node
		s := fmt.Sprintf("user-%d", i)
		for j := range 3 {
			r, err := lim.Allow(ctx, s, ls...)
			if err != nil || !r.Allowed || r.Remaining != int64(9-j) {
				t.Fatalf("%s call %d = %+v, %v", s, j, r, err)
			}
		}
	}

	// A pipeline, a script inside Do and a transaction, each on the node
	// of its first key.
	for i := range 10 {
		k := fmt.Sprintf("{t%d}:n", i)
		rs, err := st.Do(ctx,
			store.Cmd{Name: "SET", Args: []any{k, 1}},
			store.Cmd{Name: "EVAL", Args: []any{"return redis.call('INCR', KEYS[1])", 1, k}},
			store.Cmd{Name: "GET", Args: []any{k}})
		if err != nil || rs[1].Val != int64(2) || rs[2].Val != "2" {
			t.Fatalf("%s: pipeline = %v, %v", k, rs, err)
		}
		err = st.Watch(ctx, []string{k}, func(tx store.Tx) error {
			rs, err := tx.Exec(ctx, store.Cmd{Name: "INCR", Args: []any{k}})
			if err == nil && rs[0].Val != int64(3) {
				err = fmt.Errorf("INCR in EXEC = %v", rs)
			}
			return err
		})
		if err != nil {
			t.Fatalf("%s: Watch: %v", k, err)
		}
	}
}

// ids returns the node IDs of addrs.
func ids(t *testing.T, addrs []string) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		id, err := redis.String(node(t, a, "CLUSTER", "MYID"), nil)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = id
	}
	return out
}

// owner returns the index in addrs of the node serving key's slot.
func owner(t *testing.T, addrs []string, key string) int {
	for i, a := range addrs {
		c, err := redis.Dial("tcp", a)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Do("GET", key)
		c.Close()
		if redisc.ParseRedir(err) == nil {
			return i
		}
	}
	t.Fatalf("no node serves %q", key)
	return -1
}

var errorstat = regexp.MustCompile(`errorstat_(\w+):count=(\d+)`)

// refusals returns how many MOVED and ASK replies the node at addr sent.
func refusals(t *testing.T, addr string) map[string]int {
	info, err := redis.String(node(t, addr, "INFO", "errorstats"), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, m := range errorstat.FindAllStringSubmatch(info, -1) {
		out[m[1]], _ = strconv.Atoi(m[2])
	}
	return out
}

// moveSlot moves an empty slot from the master addrs[from] to addrs[to]
// and tells every master.
func moveSlot(t *testing.T, addrs []string, slot, from, to int) {
	t.Helper()
	id := ids(t, addrs)
	node(t, addrs[to], "CLUSTER", "SETSLOT", slot, "IMPORTING", id[from])
	node(t, addrs[from], "CLUSTER", "SETSLOT", slot, "MIGRATING", id[to])
	node(t, addrs[to], "CLUSTER", "SETSLOT", slot, "NODE", id[to])
	for i, a := range addrs {
		if i != to {
			node(t, a, "CLUSTER", "SETSLOT", slot, "NODE", id[to])
		}
	}
}

// A slot moved behind redisc's back: the first call is refused with MOVED,
// followed to the new owner and counted once.
func TestClusterMoved(t *testing.T) {
	cl := redistest.StartCluster(t)
	addrs := cl.Addrs()
	st := redigo.New(redigo.Cluster(newCluster(t, addrs)))
	ctx := context.Background()
	lim, _ := limiter.New(st, strategy.NewFixedWindow())
	l := limiter.PerHour(100)
	key, _ := limiter.Key(limiter.DefaultPrefix, "moved", l)
	slot := redisc.Slot(key)
	from := owner(t, addrs, key)
	to := (from + 1) % len(addrs)
	// Move the (empty) slot: the slot map redisc loaded is now stale.
	moveSlot(t, addrs, slot, from, to)
	before := refusals(t, addrs[from])["MOVED"]
	for i := range 3 {
		r, err := lim.Allow(ctx, "moved", l)
		if err != nil || !r.Allowed || r.Remaining != int64(99-i) {
			t.Fatalf("call %d after the move = %+v, %v", i, r, err)
		}
	}
	if n := refusals(t, addrs[from])["MOVED"] - before; n < 1 {
		t.Errorf("the old owner sent %d MOVED: the test did not exercise a redirection", n)
	}
	if v, err := redis.Int(node(t, addrs[to], "GET", key), nil); err != nil || v != 3 {
		t.Errorf("counter on the new owner = %v, %v; want 3", v, err)
	}
}

// A slot being migrated: a key not on the source is refused with ASK and
// run on the target after ASKING, once per call.
func TestClusterAsk(t *testing.T) {
	cl := redistest.StartCluster(t)
	addrs := cl.Addrs()
	st := redigo.New(redigo.Cluster(newCluster(t, addrs)))
	ctx := context.Background()
	lim, _ := limiter.New(st, strategy.NewFixedWindow())
	l := limiter.PerHour(100)
	key, _ := limiter.Key(limiter.DefaultPrefix, "ask", l)
	slot := redisc.Slot(key)
	from := owner(t, addrs, key)
	to := (from + 1) % len(addrs)
	id := ids(t, addrs)
	node(t, addrs[to], "CLUSTER", "SETSLOT", slot, "IMPORTING", id[from])
	node(t, addrs[from], "CLUSTER", "SETSLOT", slot, "MIGRATING", id[to])

	before := refusals(t, addrs[from])["ASK"]
	for i := range 3 {
		r, err := lim.Allow(ctx, "ask", l)
		if err != nil || !r.Allowed || r.Remaining != int64(99-i) {
			t.Fatalf("call %d during the migration = %+v, %v", i, r, err)
		}
	}
	if n := refusals(t, addrs[from])["ASK"] - before; n < 3 {
		t.Errorf("the source sent %d ASK, want at least 3", n)
	}
	rs, err := st.Do(ctx, store.Cmd{Name: "GET", Args: []any{key}})
	if err != nil || rs[0].Val != "3" {
		t.Errorf("GET during the migration = %v, %v; want 3", rs, err)
	}
	// The source still has no such key: it refuses the GET with ASK.
	c, err := redis.Dial("tcp", addrs[from])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Do("GET", key); redisc.ParseRedir(err) == nil || redisc.ParseRedir(err).Type != "ASK" {
		t.Errorf("GET on the source = %v; want ASK (the key lives on the target only)", err)
	}
}

// A key whose node does not answer: the call fails within its deadline and
// is never sent elsewhere.
func TestClusterErrors(t *testing.T) {
	cl := redistest.StartCluster(t)
	st := redigo.New(redigo.Cluster(newCluster(t, cl.Addrs())))
	// Learn the slots and connect to the key's node first, with no
	// deadline: a busy machine may take longer than the one below.
	if _, err := st.Do(context.Background(), store.Cmd{Name: "GET", Args: []any{"{q}"}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := st.Do(ctx, store.Cmd{Name: "BLPOP", Args: []any{"{q}", 0}})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("a call past its deadline = %v", err)
	}
	if !strings.HasPrefix(fmt.Sprint(err), "redigo: ") {
		t.Errorf("error %q lacks the redigo: prefix", err)
	}
}

// flushCounter counts the round trips (flushes and single-command Do
// calls) made on its node's connections.
type flushCounter struct {
	redis.Conn
	n *atomic.Int64
}

func (c flushCounter) Flush() error { c.n.Add(1); return c.Conn.Flush() }
func (c flushCounter) Do(cmd string, args ...any) (any, error) {
	if cmd != "" { // "" with nothing pending: the pool's Close, no I/O
		c.n.Add(1)
	}
	return c.Conn.Do(cmd, args...)
}
func (c flushCounter) DoWithTimeout(d time.Duration, cmd string, args ...any) (any, error) {
	c.n.Add(1)
	return redis.DoWithTimeout(c.Conn, d, cmd, args...)
}
func (c flushCounter) ReceiveWithTimeout(d time.Duration) (any, error) {
	return redis.ReceiveWithTimeout(c.Conn, d)
}

// A Batch on a Cluster goes in one pipeline per server (store.Batcher:
// "in as few round trips as the client can"), not one per hash slot: 300
// commands on 3 servers make 3 round trips (after the one that reads the
// slots), and hold 3 connections, not 300.
func TestClusterBatchPipelinePerServer(t *testing.T) {
	cl := redistest.StartCluster(t)
	var trips atomic.Int64
	c := clusterFor(cl.Addrs())
	c.CreatePool = func(addr string, opts ...redis.DialOption) (*redis.Pool, error) {
		return &redis.Pool{
			DialContext: func(ctx context.Context) (redis.Conn, error) {
				rc, err := redis.DialContext(ctx, "tcp", addr, opts...)
				if err != nil {
					return nil, err
				}
				return flushCounter{rc, &trips}, nil
			},
			MaxActive: 64, MaxIdle: 64, Wait: true,
		}, nil
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Refresh(); err != nil {
		t.Fatal(err)
	}
	st := redigo.New(redigo.Cluster(c))
	cmds := make([]store.Cmd, 300)
	for i := range cmds {
		cmds[i] = store.Cmd{Name: "INCR", Args: []any{fmt.Sprintf("batch:%d", i)}}
	}
	for round := 1; round <= 2; round++ {
		trips.Store(0)
		for i, r := range st.Batch(context.Background(), cmds) {
			if r.Err != nil || r.Val != int64(round) {
				t.Fatalf("round %d: reply %d = %+v, want %d", round, i, r, round)
			}
		}
		want := int64(len(cl.Addrs()))
		if round == 1 {
			want++ // CLUSTER SLOTS
		}
		if n := trips.Load(); n != want {
			t.Errorf("round %d: a Batch of %d commands on %d servers made %d round trips; want %d (one pipeline per server)", round, len(cmds), len(cl.Addrs()), n, want)
		}
	}
}

// A slot moved after the Store read the slots: its commands in a Batch
// are refused with MOVED by the old owner, sent again to the new one and
// counted once; the other commands of the old owner's pipeline keep their
// replies.
func TestClusterBatchMoved(t *testing.T) {
	cl := redistest.StartCluster(t)
	addrs := cl.Addrs()
	st := redigo.New(redigo.Cluster(newCluster(t, addrs)))
	ctx := context.Background()
	cmds := make([]store.Cmd, 60)
	for i := range cmds {
		cmds[i] = store.Cmd{Name: "INCR", Args: []any{fmt.Sprintf("moved:%d", i)}}
	}
	for i, r := range st.Batch(ctx, cmds) {
		if r.Err != nil || r.Val != int64(1) {
			t.Fatalf("reply %d before the move = %+v", i, r)
		}
	}
	// Move an empty slot of moved:0's node, whose other keys stay: the
	// slot maps (the Store's and redisc's) are now stale.
	used := map[int]bool{}
	for _, c := range cmds {
		used[redisc.Slot(c.Key())] = true
	}
	from := owner(t, addrs, "moved:0")
	key := ""
	for n := 0; key == ""; n++ {
		k := "fresh:" + strconv.Itoa(n)
		if !used[redisc.Slot(k)] && owner(t, addrs, k) == from {
			key = k
		}
	}
	slot := redisc.Slot(key)
	to := (from + 1) % len(addrs)
	moveSlot(t, addrs, slot, from, to)
	before := refusals(t, addrs[from])["MOVED"]
	cmds = append(cmds, store.Cmd{Name: "INCR", Args: []any{key}})
	for i, r := range st.Batch(ctx, cmds) {
		want := int64(2)
		if i == len(cmds)-1 {
			want = 1
		}
		if r.Err != nil || r.Val != want {
			t.Errorf("reply %d after the move = %+v, want %d", i, r, want)
		}
	}
	if n := refusals(t, addrs[from])["MOVED"] - before; n < 1 {
		t.Errorf("the old owner sent %d MOVED: the test did not exercise a redirection", n)
	}
	if v, err := redis.Int(node(t, addrs[to], "GET", key), nil); err != nil || v != 1 {
		t.Errorf("counter on the new owner = %v, %v; want 1", v, err)
	}
}
