package redigo_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
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

const incr = adaptertest.CountScript

// countingPool counts the connections the Store takes: one per round trip.
type countingPool struct {
	*redis.Pool
	gets atomic.Int64
}

func (p *countingPool) GetContext(ctx context.Context) (redis.Conn, error) {
	p.gets.Add(1)
	return p.Pool.GetContext(ctx)
}

// TestSharedPipelines: many callers on one server share round trips
// (fewer connections taken than calls), every call answered with a count
// of its own and the key counting exactly the calls; with sharing off,
// one connection per call.
func TestSharedPipelines(t *testing.T) {
	srv := redistest.StartServer(t)
	for _, tc := range []struct {
		name string
		opts []redigo.Option
	}{{"shared", nil}, {"off", []redigo.Option{redigo.WithSharedPipelines(0)}}} {
		t.Run(tc.name, func(t *testing.T) {
			p := &countingPool{Pool: newPool(srv.Addr(), 64)}
			t.Cleanup(func() { _ = p.Close() })
			st := redigo.New(p, tc.opts...)
			const callers, each = 24, 40
			key := "k-" + tc.name
			// One call alone first, with a deadline that fits a busy
			// machine: a store whose calls can never go (a sharing gate
			// that admits no round trip) fails here, in seconds, rather
			// than by a timeout per call of the load below.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := st.Eval(ctx, adaptertest.CountScript, []string{key + "-alone"}, nil)
			cancel()
			if err != nil {
				t.Fatalf("a lone call: %v", err)
			}
			alone := p.gets.Load()
			o := adaptertest.Hammer(t, st, key, callers, each, func(int, int) time.Duration { return 30 * time.Second })
			if o.Admitted != callers*each {
				t.Fatalf("%+v; want all %d admitted", o, callers*each)
			}
			c := p.Get()
			n, err := redis.Int64(c.Do("GET", key))
			_ = c.Close()
			if err != nil || n != callers*each {
				t.Errorf("%s = %d, %v; want %d", key, n, err, callers*each)
			}
			gets := p.gets.Load() - alone // (the GET above took its connection with Get, uncounted)
			if tc.opts == nil && gets >= callers*each {
				t.Errorf("%d callers took %d connections for %d calls: no round trip shared", callers, gets, callers*each)
			}
			if tc.opts != nil && gets != callers*each {
				t.Errorf("sharing off: %d connections for %d calls; want one each", gets, callers*each)
			}
		})
	}
}

// TestSharedPipelinesDeadlineStorm: many callers on one key with deadlines
// of a fraction of a millisecond to a few, so that calls end while queued,
// while their pipeline is out, and after their replies. Every call that
// failed without store.ErrUnknownOutcome never ran: the key counts at
// least every admitted call and at most those plus the unknown outcomes.
func TestSharedPipelinesDeadlineStorm(t *testing.T) {
	srv := redistest.StartServer(t)
	p := newPool(srv.Addr(), 64)
	t.Cleanup(func() { _ = p.Close() })
	st := redigo.New(p)
	const callers, each = 32, 60
	o := adaptertest.Hammer(t, st, "storm", callers, each, adaptertest.StormTimeout(each))
	// calls given up on may still be in flight: wait for their replies
	time.Sleep(time.Second)
	c := p.Get()
	n, err := redis.Int64(c.Do("GET", "storm"))
	_ = c.Close()
	if err != nil && !errors.Is(err, redis.ErrNil) {
		t.Fatal(err)
	}
	o.CheckCount(t, n)
}

// TestSharedPipelineServerGone: calls queued behind a server that stops
// answering each end at their own deadline, and the Store serves again
// once it is back.
func TestSharedPipelineServerGone(t *testing.T) {
	m := redistest.NewMini(t)
	px := redistest.NewProxy(t, m.Addr())
	p := newPool(px.Addr(), 64)
	t.Cleanup(func() { _ = p.Close() })
	st := redigo.New(p)
	ctx := context.Background()
	if _, err := st.Eval(ctx, incr, []string{"k"}, nil); err != nil {
		t.Fatal(err)
	}
	px.Blackhole(true)
	start := time.Now()
	o := adaptertest.Hammer(t, st, "k", 12, 1, func(int, int) time.Duration { return 200 * time.Millisecond })
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("calls with 200ms deadlines on a silent server returned after %v", took.Round(time.Millisecond))
	}
	if o.Admitted != 0 || o.NotSent+o.Unknown != 12 {
		t.Errorf("on a silent server: %+v; want 12 failed", o)
	}
	px.Blackhole(false)
	for end := time.Now().Add(10 * time.Second); ; {
		c, cancel := context.WithTimeout(ctx, time.Second)
		_, err := st.Eval(c, incr, []string{"k"}, nil)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the store does not serve after the server came back: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestClusterSharedPipelines: on a Cluster, once the Store has read the
// slot map (the first call starts reading it, and goes alone), the calls
// of many goroutines share round trips per master (fewer connections taken
// than calls; one per call with sharing off), every count exact; and a
// master that stops answering holds only its own calls: those for another
// master are answered meanwhile, within their deadlines.
func TestClusterSharedPipelines(t *testing.T) {
	c := redistest.StartCluster(t)
	addrs := c.Addrs()
	for _, tc := range []struct {
		name string
		opts []redigo.Option
	}{{"shared", nil}, {"off", []redigo.Option{redigo.WithSharedPipelines(0)}}} {
		t.Run(tc.name, func(t *testing.T) {
			var borrows atomic.Int64
			cl := clusterFor(addrs)
			create := cl.CreatePool
			cl.CreatePool = func(addr string, opts ...redis.DialOption) (*redis.Pool, error) {
				p, err := create(addr, opts...)
				if err != nil {
					return nil, err
				}
				dial, test := p.DialContext, p.TestOnBorrow
				p.DialContext = func(ctx context.Context) (redis.Conn, error) {
					borrows.Add(1)
					return dial(ctx)
				}
				p.TestOnBorrow = func(c redis.Conn, at time.Time) error {
					borrows.Add(1)
					return test(c, at)
				}
				return p, nil
			}
			t.Cleanup(func() { _ = cl.Close() })
			if err := cl.Refresh(); err != nil {
				t.Fatal(err)
			}
			st := redigo.New(redigo.Cluster(cl), tc.opts...)
			ka, kb := keyOnNode(t, addrs, addrs[0], tc.name), keyOnNode(t, addrs, addrs[1], tc.name)
			if _, err := st.Eval(context.Background(), incr, []string{ka}, nil); err != nil {
				t.Fatal(err)
			}
			if tc.opts == nil {
				adaptertest.WaitFor(t, "the slot map", func() bool { return redigo.SlotMapKnown(st) })
			}
			keys := []string{ka, kb}
			for i := range 6 {
				keys = append(keys, fmt.Sprintf("{%s-%d}", tc.name, i))
			}
			const callers, each = 24, 40
			borrows.Store(0)
			adaptertest.HammerKeys(t, st, keys, callers, each)
			gets := borrows.Load()
			for _, k := range keys {
				want := int64(callers * each / len(keys))
				if k == ka {
					want++ // the first call
				}
				conn := cl.Get()
				if err := redisc.BindConn(conn, k); err != nil {
					t.Fatal(err)
				}
				n, err := redis.Int64(conn.Do("GET", k))
				_ = conn.Close()
				if err != nil || n != want {
					t.Errorf("%s = %d, %v; want %d", k, n, err, want)
				}
			}
			if tc.opts == nil && gets >= callers*each {
				t.Errorf("%d callers took %d connections for %d calls: no round trip shared", callers, gets, callers*each)
			}
			if tc.opts != nil && gets < callers*each {
				t.Errorf("sharing off: %d connections for %d calls; want one each", gets, callers*each)
			}

			adaptertest.OneMasterSilent(t, st, func() func() {
				node(t, addrs[1], "CLIENT", "PAUSE", 2000, "ALL")
				return func() { node(t, addrs[1], "CLIENT", "UNPAUSE") }
			}, kb, ka)
		})
	}
}

// keyOnNode returns a key named after tag that the master at addr serves.
func keyOnNode(t *testing.T, addrs []string, addr, tag string) string {
	t.Helper()
	slots, err := redis.Values(node(t, addrs[0], "CLUSTER", "SLOTS"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10000 {
		k := fmt.Sprintf("{%s-on-%d}", tag, i)
		slot := redisc.Slot(k)
		for _, r := range slots {
			f, _ := redis.Values(r, nil)
			first, _ := redis.Int(f[0], nil)
			last, _ := redis.Int(f[1], nil)
			m, _ := redis.Values(f[2], nil)
			host, _ := redis.String(m[0], nil)
			port, _ := redis.Int(m[1], nil)
			if first <= slot && slot <= last && net.JoinHostPort(host, strconv.Itoa(port)) == addr {
				return k
			}
		}
	}
	t.Fatalf("no key on %s", addr)
	return ""
}

// TestClusterSharedPipelinesMoved: a slot moved after the Store (and
// redisc) read the slot map: calls shared on the old owner are refused
// with MOVED (so they did not run), each follows the redirection alone,
// and every call is counted once on the new owner. Two slow scripts on
// another key of the old owner hold the master's round trips, so that the
// calls queue and leave together, on the stale map.
func TestClusterSharedPipelinesMoved(t *testing.T) {
	c := redistest.StartCluster(t)
	addrs := c.Addrs()
	st := redigo.New(redigo.Cluster(newCluster(t, addrs)))
	const key = "{shared-moved}"
	if _, err := st.Eval(context.Background(), incr, []string{key}, nil); err != nil {
		t.Fatal(err)
	}
	adaptertest.WaitFor(t, "the slot map", func() bool { return redigo.SlotMapKnown(st) })
	from := owner(t, addrs, key)
	to := (from + 1) % len(addrs)
	node(t, addrs[from], "DEL", key) // the slot moves empty
	moveSlot(t, addrs, redisc.Slot(key), from, to)
	before := refusals(t, addrs[from])["MOVED"]

	held := keyOnNode(t, addrs, addrs[from], "held")
	const slow = `local t = redis.call('TIME') local s = t[1] * 1000000 + t[2]
repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - s >= 300000
return 1`
	var wg sync.WaitGroup
	for range redigo.DefaultSharedPipelines {
		wg.Go(func() {
			if _, err := st.Eval(context.Background(), slow, []string{held}, nil); err != nil {
				t.Errorf("slow call: %v", err)
			}
		})
	}
	time.Sleep(100 * time.Millisecond) // both in flight
	const callers = 20
	for range callers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := st.Eval(ctx, incr, []string{key}, nil); err != nil {
				t.Errorf("call after the move: %v", err)
			}
		})
	}
	wg.Wait()
	if n := refusals(t, addrs[from])["MOVED"] - before; n < callers/2 {
		t.Errorf("the old owner sent %d MOVED for %d calls: the calls did not leave together on the stale map", n, callers)
	}
	if v, err := redis.Int(node(t, addrs[to], "GET", key), nil); err != nil || v != callers {
		t.Errorf("counter on the new owner = %v, %v; want %d", v, err, callers)
	}
}
