package redigo_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/redigo"
	"github.com/quotagate/limiter/strategy"
)

func TestNewNil(t *testing.T) {
	if st := redigo.New(nil); st != nil {
		t.Errorf("New(nil) = %v, want nil", st)
	}
	if st := redigo.New((*redis.Pool)(nil)); st != nil {
		t.Errorf("New(nil *redis.Pool) = %v, want nil", st)
	}
	if st := redigo.New(redigo.Cluster(nil)); st != nil {
		t.Errorf("New(Cluster(nil)) = %v, want nil", st)
	}
	if _, err := limiter.New(redigo.New(nil), strategy.NewFixedWindow()); !errors.Is(err, limiter.ErrNilStore) {
		t.Errorf("limiter.New(New(nil)) error = %v, want ErrNilStore", err)
	}
}

// server starts a redis-server and returns a pool of size connections on it.
func server(t *testing.T, size int) (*redistest.Server, *redis.Pool) {
	t.Helper()
	srv := redistest.StartServer(t)
	p := newPool(srv.Addr(), size)
	t.Cleanup(func() { _ = p.Close() })
	return srv, p
}

func TestReplies(t *testing.T) {
	_, p := server(t, 4)
	st := redigo.New(p)
	ctx := context.Background()
	rs, err := st.Do(ctx,
		store.Cmd{Name: "SET", Args: []any{"k", "v"}},
		store.Cmd{Name: "HSET", Args: []any{"h", "f", []byte("x")}},
		store.Cmd{Name: "HGETALL", Args: []any{"h"}},
		store.Cmd{Name: "EVAL", Args: []any{"return {1, 'a', {2, false}, redis.status_reply('S')}", 0}},
		store.Cmd{Name: "GET", Args: []any{"missing"}},
		store.Cmd{Name: "NOSUCHCOMMAND"},
	)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"OK", int64(1), []any{"f", "x"}, []any{int64(1), "a", []any{int64(2), nil}, "S"}}
	for i, w := range want {
		if rs[i].Err != nil || !reflect.DeepEqual(rs[i].Val, w) {
			t.Errorf("reply %d = %#v, %v; want %#v", i, rs[i].Val, rs[i].Err, w)
		}
	}
	if !errors.Is(rs[4].Err, store.ErrNil) {
		t.Errorf("GET missing = %v, want ErrNil", rs[4].Err)
	}
	var re redis.Error
	if !errors.As(rs[5].Err, &re) || rs[5].Err.Error()[:8] != "redigo: " {
		t.Errorf("unknown command = %v; want a redis.Error prefixed redigo:", rs[5].Err)
	}
	if _, err := st.EvalSha(ctx, "0000000000000000000000000000000000000000", nil, nil); !errors.Is(err, store.ErrNoScript) {
		t.Errorf("EVALSHA unknown = %v, want ErrNoScript", err)
	}
	if v, err := st.Eval(ctx, "return nil", nil, nil); v != nil || !errors.Is(err, store.ErrNil) {
		t.Errorf("EVAL returning nil = %v, %v; want ErrNil", v, err)
	}
}

// onePool hands out one raw connection again and again and never cleans it
// up, unlike redis.Pool (whose Close sends UNWATCH itself): what the Store
// leaves on the connection is what the next user gets.
type onePool struct {
	mu        sync.Mutex
	c         redis.Conn
	out       bool
	discarded bool
}

func (p *onePool) GetContext(context.Context) (redis.Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.out {
		return nil, errors.New("onePool: connection already out")
	}
	if p.discarded {
		return nil, errors.New("onePool: connection discarded")
	}
	p.out = true
	return &lent{Conn: p.c, p: p}, nil
}

type lent struct {
	redis.Conn
	p *onePool
}

func (l *lent) Close() error {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	l.p.out = false
	if l.Conn.Err() != nil {
		l.p.discarded = true
	}
	return nil
}

func TestWatch(t *testing.T) {
	srv, other := server(t, 2)
	raw, err := redis.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	one := &onePool{c: raw}
	st := redigo.New(one)
	set := func(k, v string) {
		t.Helper()
		c := other.Get()
		defer c.Close()
		if _, err := c.Do("SET", k, v); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	set("a", "1")
	set("b", "1")

	// Watch, a concurrent change, Exec: aborted.
	err = st.Watch(ctx, []string{"a"}, func(tx store.Tx) error {
		rs, err := tx.Do(ctx, store.Cmd{Name: "GET", Args: []any{"a"}})
		if err != nil || rs[0].Val != "1" {
			t.Errorf("GET in Watch = %v, %v", rs, err)
		}
		set("a", "2")
		_, err = tx.Exec(ctx, store.Cmd{Name: "SET", Args: []any{"a", "3"}})
		return err
	})
	if !errors.Is(err, store.ErrTxAborted) {
		t.Fatalf("Exec after a concurrent change = %v, want ErrTxAborted", err)
	}

	// freshExec watches b, which does not change, and must commit: it fails
	// if a is still watched on the (only) connection and changed since.
	freshExec := func(when string) {
		t.Helper()
		set("a", when) // a change that only matters if a is still watched
		var rs []store.Reply
		err := st.Watch(ctx, []string{"b"}, func(tx store.Tx) error {
			var err error
			rs, err = tx.Exec(ctx,
				store.Cmd{Name: "INCR", Args: []any{"b"}},
				store.Cmd{Name: "GET", Args: []any{"b"}})
			return err
		})
		if err != nil || len(rs) != 2 || rs[0].Err != nil || rs[1].Err != nil {
			t.Fatalf("%s: fresh Watch+Exec = %v, %v; want committed", when, rs, err)
		}
	}
	freshExec("after an aborted Exec")

	errFn := errors.New("fn failed")
	err = st.Watch(ctx, []string{"a"}, func(tx store.Tx) error {
		if _, err := tx.Do(ctx, store.Cmd{Name: "GET", Args: []any{"a"}}); err != nil {
			t.Error(err)
		}
		return errFn
	})
	if err != errFn {
		t.Fatalf("Watch returned %v, want fn's error unchanged", err)
	}
	freshExec("after fn's error")

	if err := st.Watch(ctx, []string{"a"}, func(store.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	freshExec("after a Watch without Exec")

	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not reach the caller")
			}
		}()
		_ = st.Watch(ctx, []string{"a"}, func(store.Tx) error { panic("boom") })
	}()
	freshExec("after a panic in fn")

	// A transaction the server refuses runs nothing.
	err = st.Watch(ctx, []string{"b"}, func(tx store.Tx) error {
		rs, err := tx.Exec(ctx,
			store.Cmd{Name: "INCR", Args: []any{"b"}},
			store.Cmd{Name: "NOSUCHCOMMAND"})
		if err != nil || len(rs) != 2 || rs[0].Err == nil || rs[1].Err == nil {
			t.Errorf("EXECABORT = %v, %v; want an error in every reply", rs, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	freshExec("after EXECABORT")
	if one.discarded {
		t.Error("a healthy connection was discarded")
	}
}

// On a pooled connection, Watch with a deadline that passes inside fn
// discards the connection rather than return it still watching.
func TestWatchDeadlineDiscards(t *testing.T) {
	_, p := server(t, 1)
	st := redigo.New(p)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := st.Watch(ctx, []string{"a"}, func(store.Tx) error {
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Watch = %v", err)
	}
	if s := p.Stats(); s.ActiveCount != 0 {
		t.Errorf("after a Watch past its deadline the pool holds %d connections, want 0 (discarded)", s.ActiveCount)
	}
	if _, err := st.Do(context.Background(), store.Cmd{Name: "SET", Args: []any{"a", "1"}}); err != nil {
		t.Fatal(err)
	}
}

// The deadline of ctx bounds every call, pipelines too; the late reply is
// never read by the next call.
func TestDeadline(t *testing.T) {
	srv := redistest.StartServer(t)
	px := redistest.NewProxy(t, srv.Addr())
	for _, tc := range []struct {
		name string
		pool func(addr string) redigo.Pool
	}{
		{"redis.Pool", func(addr string) redigo.Pool { return newPool(addr, 4) }},
		// Connections without redis.ConnWithContext, as a redisc.Conn.
		{"ConnWithTimeout", func(addr string) redigo.Pool { return timeoutOnly{newPool(addr, 4)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := redigo.New(tc.pool(px.Addr()))
			ctx := context.Background()
			if _, err := st.Do(ctx, store.Cmd{Name: "SET", Args: []any{"n", 0}}); err != nil {
				t.Fatal(err)
			}
			calls := []struct {
				name string
				f    func(ctx context.Context) error
			}{
				{"EVAL", func(ctx context.Context) error {
					_, err := st.Eval(ctx, "return redis.call('INCR', KEYS[1])", []string{"n"}, nil)
					return err
				}},
				{"pipeline", func(ctx context.Context) error {
					_, err := st.Do(ctx, store.Cmd{Name: "INCR", Args: []any{"n"}}, store.Cmd{Name: "GET", Args: []any{"n"}})
					return err
				}},
			}
			for i, c := range calls {
				// A reply far later than the deadline, and a bound between
				// them that a busy machine still meets.
				px.Delay(3 * time.Second)
				cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
				start := time.Now()
				err := c.f(cctx)
				took := time.Since(start)
				cancel()
				if took > time.Second {
					t.Errorf("%s: took %s with a 100ms deadline", c.name, took)
				}
				if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, store.ErrUnknownOutcome) {
					t.Errorf("%s: %v; want DeadlineExceeded and ErrUnknownOutcome", c.name, err)
				}
				px.Delay(0)
				rs, err := st.Do(ctx, store.Cmd{Name: "INCR", Args: []any{"n"}})
				if err != nil || rs[0].Val != int64(2*i+2) {
					t.Errorf("%s: next call = %v, %v; want its own reply %d", c.name, rs, err, 2*i+2)
				}
			}
			// A deadline already past writes nothing.
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			if _, err := st.Do(cctx, store.Cmd{Name: "INCR", Args: []any{"n"}}); !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrUnknownOutcome) {
				t.Errorf("Do with a cancelled context = %v; want Canceled, not ErrUnknownOutcome", err)
			}
			if _, err := st.Do(ctx, store.Cmd{Name: "SET", Args: []any{"n", 0}}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// timeoutOnly hides redis.ConnWithContext, as a redisc.Conn has none.
type timeoutOnly struct{ p *redis.Pool }

func (p timeoutOnly) GetContext(ctx context.Context) (redis.Conn, error) {
	c, err := p.p.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	return timeoutConn{c, c.(redis.ConnWithTimeout)}, nil
}

type timeoutConn struct {
	redis.Conn
	t redis.ConnWithTimeout
}

func (c timeoutConn) DoWithTimeout(d time.Duration, cmd string, args ...any) (any, error) {
	return c.t.DoWithTimeout(d, cmd, args...)
}

func (c timeoutConn) ReceiveWithTimeout(d time.Duration) (any, error) {
	return c.t.ReceiveWithTimeout(d)
}

// A lost reply is ErrUnknownOutcome, counted once, and its connection does
// not go back to the pool.
func TestLostReplyDiscardsConn(t *testing.T) {
	srv := redistest.StartServer(t)
	px := redistest.NewProxy(t, srv.Addr())
	p := newPool(px.Addr(), 4)
	defer p.Close()
	st := redigo.New(p)
	ctx := context.Background()
	for _, cmds := range [][]store.Cmd{
		{{Name: "INCR", Args: []any{"n"}}},
		{{Name: "INCR", Args: []any{"n"}}, {Name: "GET", Args: []any{"n"}}},
	} {
		px.DropReply("INCR")
		_, err := st.Do(ctx, cmds...)
		if !errors.Is(err, store.ErrUnknownOutcome) {
			t.Errorf("%d commands, reply dropped: %v; want ErrUnknownOutcome", len(cmds), err)
		}
		if s := p.Stats(); s.ActiveCount != 0 || s.IdleCount != 0 {
			t.Errorf("after a lost reply the pool holds %d connections (%d idle), want 0", s.ActiveCount, s.IdleCount)
		}
	}
	px.ResetCounts()
	rs, err := st.Do(ctx, store.Cmd{Name: "GET", Args: []any{"n"}})
	if err != nil || rs[0].Val != "2" {
		t.Errorf("counter = %v, %v; want 2 (each lost INCR ran once)", rs, err)
	}
	if n := px.Commands()["INCR"]; n != 0 {
		t.Errorf("%d INCR re-sent", n)
	}
}

// TestOnBorrow is what makes a server restart invisible: without it, the
// first call on each idle connection fails after writing its command.
func TestRestartTestOnBorrow(t *testing.T) {
	srv := redistest.StartServer(t)
	ctx := context.Background()
	for _, check := range []bool{true, false} {
		p := newPool(srv.Addr(), 4)
		if !check {
			p.TestOnBorrow = nil
		}
		st := redigo.New(p)
		if _, err := st.Do(ctx, store.Cmd{Name: "PING"}); err != nil {
			t.Fatal(err)
		}
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		_, err := st.Do(ctx, store.Cmd{Name: "INCR", Args: []any{"n"}})
		switch {
		case check && err != nil:
			t.Errorf("with TestOnBorrow, first call after a restart: %v", err)
		case !check && !errors.Is(err, store.ErrUnknownOutcome):
			t.Errorf("without TestOnBorrow, first call after a restart: %v; want ErrUnknownOutcome (the case TestOnBorrow exists for)", err)
		}
		_ = p.Close()
	}
}

// TestWatchAgainThroughDo: a WATCH that fn sends through Tx.Do after an
// EXEC (which cleared the first one) is un-watched on the way out too, so
// a pool that does not clean connections itself (onePool) never hands the
// next user a watching connection whose transaction would abort.
func TestWatchAgainThroughDo(t *testing.T) {
	srv, other := server(t, 2)
	raw, err := redis.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	st := redigo.New(&onePool{c: raw})
	ctx := context.Background()
	err = st.Watch(ctx, []string{"a"}, func(tx store.Tx) error {
		if _, err := tx.Exec(ctx, store.Cmd{Name: "SET", Args: []any{"a", "1"}}); err != nil {
			return err
		}
		// A second round on the same connection: watch again, read.
		_, err := tx.Do(ctx, store.Cmd{Name: "WATCH", Args: []any{"a"}}, store.Cmd{Name: "GET", Args: []any{"a"}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	c := other.Get()
	_, _ = c.Do("SET", "a", "changed")
	c.Close()
	// The next user watches b only, which nobody changes.
	err = st.Watch(ctx, []string{"b"}, func(tx store.Tx) error {
		_, err := tx.Exec(ctx, store.Cmd{Name: "INCR", Args: []any{"b"}})
		return err
	})
	if err != nil {
		t.Errorf("a fresh Watch on b after the previous user's Watch returned: %v; want committed (the connection still watched a)", err)
	}
}
