package redigo_test

import (
	"context"
	"errors"
	"maps"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"

	"github.com/quotagate/limiter/internal/adaptertest"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store/redigo"
)

// TestDialOptionThatDialsWins: an option that dials
// (redis.DialContextFunc) given to Dial takes precedence over nd, as
// Dial's doc says: the connection is made by the caller's function.
func TestDialOptionThatDialsWins(t *testing.T) {
	srv := redistest.StartServer(t)
	var own atomic.Int32
	dialOwn := redis.DialContextFunc(func(ctx context.Context, network, addr string) (net.Conn, error) {
		own.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	})
	p := &redis.Pool{
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redigo.Dial(ctx, &net.Dialer{Timeout: time.Second}, "tcp", srv.Addr(), dialOwn)
		},
		TestOnBorrow: redigo.TestOnBorrow,
		MaxIdle:      4,
	}
	t.Cleanup(func() { _ = p.Close() })
	st := redigo.New(p)
	for i := range 3 {
		if v, err := st.Eval(context.Background(), incr, []string{"k"}, nil); err != nil || v != int64(i+1) {
			t.Fatalf("call %d = %v, %v; want %d", i, v, err, i+1)
		}
	}
	if n := own.Load(); n == 0 {
		t.Errorf("the redis.DialContextFunc given to Dial made %d connections; want it to make them, not nd", n)
	}
}

// TestClusterSilentMasterHoldsOnlyItsOwn: on a Cluster, calls
// share pipelines per master: while both round trips of a master that
// stopped answering are out, a call for another master goes at once and
// is answered, rather than waiting behind them.
func TestClusterSilentMasterHoldsOnlyItsOwn(t *testing.T) {
	c := redistest.StartCluster(t)
	addrs := c.Addrs()
	cl, dialled := countingCluster(t, addrs)
	st := redigo.New(redigo.Cluster(cl))
	served, silent := keyOnNode(t, addrs, addrs[0], "served"), keyOnNode(t, addrs, addrs[1], "silent")
	adaptertest.WaitFor(t, "the slot map", func() bool {
		_, _ = st.Eval(context.Background(), incr, []string{served}, nil)
		return redigo.SlotMapKnown(st)
	})
	before := dialled.of(addrs[1])
	node(t, addrs[1], "CLIENT", "PAUSE", 2500, "ALL")
	t.Cleanup(func() { node(t, addrs[1], "CLIENT", "UNPAUSE") })
	var wg sync.WaitGroup
	defer wg.Wait()
	for range redigo.DefaultSharedPipelines {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, _ = st.Eval(ctx, incr, []string{silent}, nil)
		})
	}
	adaptertest.WaitFor(t, "both round trips of the silent master out", func() bool {
		return dialled.of(addrs[1])-before >= redigo.DefaultSharedPipelines
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if v, err := st.Eval(ctx, incr, []string{served}, nil); err != nil {
		t.Errorf("a call for another master while the silent master's round trips are out = %v, %v; want it answered", v, err)
	}
}

// TestSharedPipelineEndsAtLatestDeadline: a shared pipeline on a
// silent server reads its replies until the latest deadline of its calls,
// then lets its connection go, even when the connection has no read
// timeout: it does not hold a pooled connection forever.
func TestSharedPipelineEndsAtLatestDeadline(t *testing.T) {
	srv := redistest.StartServer(t)
	px := redistest.NewProxy(t, srv.Addr())
	p := &countingPool{Pool: newPoolReading(px.Addr(), 16, 0)} // no read timeout
	t.Cleanup(func() { _ = p.Close() })
	t.Cleanup(func() { px.Blackhole(false) })
	st := redigo.New(p)
	if _, err := st.Eval(context.Background(), incr, []string{"warm"}, nil); err != nil {
		t.Fatal(err)
	}
	px.Blackhole(true)
	p.gets.Store(0)
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range 2 { // alone: both slots in flight
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
			defer cancel()
			_, errs[i] = st.Eval(ctx, incr, []string{"k"}, nil)
		})
	}
	adaptertest.WaitFor(t, "2 calls in flight", func() bool { return p.gets.Load() == 2 })
	for i := 2; i < 5; i++ { // queued, then one pipeline
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, errs[i] = st.Eval(ctx, incr, []string{"k"}, nil)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("call %d on a silent server = %v; want context.DeadlineExceeded", i, err)
		}
	}
	if n := p.gets.Load(); n != 3 {
		t.Fatalf("%d connections taken for 2 calls alone and 3 queued; want 3 (one pipeline)", n)
	}
	adaptertest.WaitFor(t, "the shared pipeline to let its connection go after the latest deadline", func() bool {
		return p.ActiveCount() == 0
	})
}

// TestAskDialUsesDialOptions: a call on a slot being migrated,
// refused with ASK, goes to the importing node on a connection dialled
// with the cluster's DialOptions (where a password or TLS settings go).
func TestAskDialUsesDialOptions(t *testing.T) {
	c := redistest.StartCluster(t)
	addrs := c.Addrs()
	cl, dialled := countingCluster(t, addrs)
	st := redigo.New(redigo.Cluster(cl), redigo.WithSharedPipelines(0))
	const key = "{pin7-ask}"
	slot := redisc.Slot(key)
	from := owner(t, addrs, key)
	to := (from + 1) % len(addrs)
	id := ids(t, addrs)
	node(t, addrs[to], "CLUSTER", "SETSLOT", slot, "IMPORTING", id[from])
	node(t, addrs[from], "CLUSTER", "SETSLOT", slot, "MIGRATING", id[to])
	before := refusals(t, addrs[from])["ASK"]
	dialled.reset()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if v, err := st.Eval(ctx, incr, []string{key}, nil); err != nil || v != int64(1) {
		t.Fatalf("call during the migration = %v, %v; want 1", v, err)
	}
	if n := refusals(t, addrs[from])["ASK"] - before; n < 1 {
		t.Fatalf("the source sent %d ASK; the test needs the call refused with ASK", n)
	}
	if n := dialled.of(addrs[to]); n == 0 {
		t.Errorf("the connection to the ASK target %s was not dialled with the cluster's DialOptions (dialled through them: %v)", addrs[to], dialled.all())
	}
}

// dialCount counts the connections a Cluster dialled, by address.
type dialCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *dialCount) of(addr string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[addr]
}

func (d *dialCount) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.n)
}

func (d *dialCount) all() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.n)
}

// countingCluster is a Cluster of addrs, its slot map loaded, that dials
// every connection through its DialOptions and counts them. Its pools keep
// no idle connection, so that each connection a call takes is dialled and
// counted (a pooled one, kept from the slot map's load, was not).
func countingCluster(t *testing.T, addrs []string) (*redisc.Cluster, *dialCount) {
	t.Helper()
	d := &dialCount{n: map[string]int{}}
	cl := clusterFor(addrs)
	create := cl.CreatePool
	cl.CreatePool = func(addr string, opts ...redis.DialOption) (*redis.Pool, error) {
		p, err := create(addr, opts...)
		if p != nil {
			p.MaxIdle = 0
		}
		return p, err
	}
	cl.DialOptions = append(cl.DialOptions, redis.DialContextFunc(func(ctx context.Context, network, addr string) (net.Conn, error) {
		d.mu.Lock()
		d.n[addr]++
		d.mu.Unlock()
		var nd net.Dialer
		return nd.DialContext(ctx, network, addr)
	}))
	t.Cleanup(func() { _ = cl.Close() })
	if err := cl.Refresh(); err != nil {
		t.Fatal(err)
	}
	return cl, d
}
