package goredis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// A command without arguments (PING, TIME) in a Batch has no guard; the
// commands after it keep theirs (it used to panic).
func TestBatchCommandWithoutArguments(t *testing.T) {
	m := redistest.NewMini(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	st := goredis.New(rdb)
	var rs []store.Reply
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("Batch(GET, PING) panicked: %v", p)
			}
		}()
		rs = st.Batch(context.Background(), []store.Cmd{
			{Name: "SET", Args: []any{"k", "v"}},
			{Name: "PING"},
		})
	}()
	if rs[0].Err != nil || rs[0].Val != "OK" || rs[1].Err != nil || rs[1].Val != "PONG" {
		t.Fatalf("Batch = %+v", rs)
	}
}

// A typed nil client: New returns nil (limiter.New then says ErrNilStore),
// as redigo.New does for a nil *redis.Pool.
func TestNewTypedNil(t *testing.T) {
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("New((*redis.Client)(nil)) panicked: %v", p)
		}
	}()
	var c *redis.Client
	st := goredis.New(c)
	if _, err := limiter.New(st, strategy.NewFixedWindow()); !errors.Is(err, limiter.ErrNilStore) {
		t.Fatalf("limiter.New(New(nil *redis.Client)) = %v, want ErrNilStore", err)
	}
}

// keyOn returns a key served by the node at addr.
func keyOn(t *testing.T, rdb *redis.ClusterClient, addr string) string {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < 10000; i++ {
		k := fmt.Sprintf("review:%d", i)
		c, err := rdb.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if c.Options().Addr == addr {
			return k
		}
	}
	t.Fatalf("no key on %s", addr)
	return ""
}

// A Batch over two Cluster nodes, one of which does not answer (CLIENT
// PAUSE): the command on the healthy node ran and keeps its reply; only
// the silent node's is an unknown outcome (the Batcher contract: a failure
// is the failure of the commands it touched, never of the others). With
// go-redis's defaults (the adapter bounds the call) and with the
// recommended options (go-redis's own Cluster pipeline used to end every
// node's commands with the silent node's error).
func TestBatchClusterOneNodeSilent(t *testing.T) {
	c := redistest.StartCluster(t)
	addrs := c.Addrs()
	for name, opt := range map[string]*redis.ClusterOptions{
		"defaults":    {Addrs: addrs},
		"recommended": {Addrs: addrs, MaxRetries: -1, ContextTimeoutEnabled: true},
	} {
		t.Run(name, func(t *testing.T) {
			rdb := redis.NewClusterClient(opt)
			t.Cleanup(func() { _ = rdb.Close() })
			st := goredis.New(rdb)
			ka, kb := keyOn(t, rdb, addrs[0]), keyOn(t, rdb, addrs[1])
			// Warm up: connections to both nodes.
			for _, r := range st.Batch(context.Background(), []store.Cmd{{Name: "DEL", Args: []any{ka}}, {Name: "DEL", Args: []any{kb}}}) {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
			}
			pause := redis.NewClient(&redis.Options{Addr: addrs[1]})
			defer pause.Close()
			if err := pause.Do(context.Background(), "CLIENT", "PAUSE", 1500, "ALL").Err(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			rs := st.Batch(ctx, []store.Cmd{{Name: "INCR", Args: []any{ka}}, {Name: "INCR", Args: []any{kb}}})
			if !errors.Is(rs[1].Err, store.ErrUnknownOutcome) {
				t.Errorf("INCR on the paused node: %+v; want ErrUnknownOutcome", rs[1])
			}
			time.Sleep(1600 * time.Millisecond)
			n, err := rdb.Get(context.Background(), ka).Int64()
			if err != nil {
				t.Fatal(err)
			}
			if rs[0].Err != nil || rs[0].Val != int64(1) {
				t.Errorf("INCR on the healthy node = %+v (its counter is %d); want 1, no error: the other node's silence is not its failure", rs[0], n)
			}
		})
	}
}

// A RESP3 big number (a script's {big_number=...}, Redis 7) is normalised
// to its text, as the rueidis and redigo adapters do and as store.Reply's
// contract says (int64, string, []any or nil); go-redis reads it as a
// *big.Int. An error reply inside an array is the adapter's error, NOSCRIPT
// mapped to store.ErrNoScript.
func TestBigNumberReply(t *testing.T) {
	s := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	st := goredis.New(rdb)
	v, err := st.Eval(context.Background(), "return {big_number='123456789012345678901234'}", nil, nil)
	if err != nil || v != "123456789012345678901234" {
		t.Errorf("EVAL big_number = %#v (%T), %v; want the string 123456789012345678901234", v, v, err)
	}
	if _, err := store.String(v); err != nil {
		t.Errorf("store.String: %v", err)
	}
	v, err = st.Eval(context.Background(), "return {1, {err='NOSCRIPT gone'}, {err='ERR boom'}}", nil, nil)
	vals, ok := v.([]any)
	if err != nil || !ok || len(vals) != 3 {
		t.Fatalf("EVAL {1, {err}, {err}} = %#v, %v", v, err)
	}
	if e, ok := vals[1].(error); !ok || !errors.Is(e, store.ErrNoScript) || !strings.HasPrefix(e.Error(), "goredis: ") {
		t.Errorf("a NOSCRIPT error inside an array = %#v; want the adapter's error wrapping store.ErrNoScript", vals[1])
	}
	if e, ok := vals[2].(error); !ok || errors.Is(e, store.ErrNoScript) || e.Error() != "goredis: ERR boom" {
		t.Errorf("an error inside an array = %#v; want goredis: ERR boom", vals[2])
	}
}

// With the package's recommended options (ContextTimeoutEnabled: true)
// go-redis turns a context's deadline into socket timeouts but does not see
// a cancellation: the adapter bounds a call whose context has no deadline,
// so a cancellation ends it at once, not at ReadTimeout.
func TestCancelHonoured(t *testing.T) {
	s := redistest.StartServer(t)
	p := redistest.NewProxy(t, s.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true, ReadTimeout: 3 * time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	st := goredis.New(rdb)
	if _, err := st.Do(context.Background(), store.Cmd{Name: "SET", Args: []any{"k", 1}}); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	defer p.Blackhole(false)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := st.EvalSha(ctx, "0000000000000000000000000000000000000000", []string{"k"}, nil)
	el := time.Since(start)
	if el > time.Second || !errors.Is(err, context.Canceled) {
		t.Errorf("a call cancelled after 100ms returned after %v with %v; want about 100ms and context.Canceled", el.Round(time.Millisecond), err)
	}
}
