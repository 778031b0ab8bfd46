package redistest_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// eachBackend runs f against a fresh miniredis and a fresh redis-server.
func eachBackend(t *testing.T, f func(t *testing.T, addr string)) {
	t.Helper()
	t.Parallel()
	t.Run("miniredis", func(t *testing.T) {
		t.Parallel()
		f(t, redistest.NewMini(t).Addr())
	})
	t.Run("redis-server", func(t *testing.T) {
		t.Parallel()
		f(t, redistest.StartServer(t).Addr())
	})
}

// must fails the test if cmd failed, and returns cmd.
func must[C interface{ Err() error }](t *testing.T, cmd C) C {
	t.Helper()
	if err := cmd.Err(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// pipelined runs fn in a pipeline (or a MULTI/EXEC transaction) and fails
// the test on error.
func pipelined(t *testing.T, tx bool, c *redis.Client, fn func(redis.Pipeliner)) []redis.Cmder {
	t.Helper()
	run := c.Pipelined
	if tx {
		run = c.TxPipelined
	}
	cmds, err := run(context.Background(), func(pipe redis.Pipeliner) error { fn(pipe); return nil })
	if err != nil {
		t.Fatal(err)
	}
	return cmds
}

func TestProxyPassThrough(t *testing.T) {
	eachBackend(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		p := redistest.NewProxy(t, addr)
		c := newClient(t, p.Addr())

		must(t, c.Set(ctx, "k", "v", 0))
		if got := must(t, c.Get(ctx, "k")).Val(); got != "v" {
			t.Fatalf("GET = %q", got)
		}
		cmds := pipelined(t, false, c, func(pipe redis.Pipeliner) {
			for range 5 {
				pipe.Incr(ctx, "n")
			}
		})
		for i, cmd := range cmds {
			if got := cmd.(*redis.IntCmd).Val(); got != int64(i+1) {
				t.Fatalf("pipelined INCR #%d = %d", i, got)
			}
		}
		var incr *redis.IntCmd
		var get *redis.StringCmd
		pipelined(t, true, c, func(pipe redis.Pipeliner) {
			incr = pipe.Incr(ctx, "n")
			get = pipe.Get(ctx, "k")
		})
		if incr.Val() != 6 || get.Val() != "v" {
			t.Fatalf("MULTI/EXEC: INCR = %d, GET = %q", incr.Val(), get.Val())
		}
		if n := p.Commands(); n["MULTI"] != 1 || n["EXEC"] != 1 || n["INCR"] != 6 {
			t.Fatalf("Commands() = %v", n)
		}
	})
}

func TestProxyRESP3(t *testing.T) {
	eachBackend(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		p := redistest.NewProxy(t, addr)
		c3 := newClient(t, p.Addr()) // go-redis defaults to Protocol 3
		must(t, c3.HSet(ctx, "h", "a", "1", "b", "2"))
		reply := must(t, c3.Do(ctx, "HGETALL", "h")).Val()
		m, ok := reply.(map[any]any)
		if !ok || len(m) != 2 || m["a"] != "1" || m["b"] != "2" {
			t.Fatalf("RESP3 HGETALL = %#v, want a map", reply)
		}
		if p.Commands()["HELLO"] == 0 {
			t.Fatal("no HELLO went through the proxy")
		}

		c2 := newClient(t, p.Addr(), func(o *redis.Options) { o.Protocol = 2 })
		if reply := must(t, c2.Do(ctx, "HGETALL", "h")).Val(); len(reply.([]any)) != 4 {
			t.Fatalf("RESP2 HGETALL = %#v", reply)
		}
	})
}

func TestProxyDropReply(t *testing.T) {
	eachBackend(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		p := redistest.NewProxy(t, addr)
		c := newClient(t, p.Addr())
		direct := newClient(t, addr)
		must(t, c.Ping(ctx))

		p.DropReply("incr")
		if err := c.Incr(ctx, "n").Err(); err == nil {
			t.Fatal("INCR with a dropped reply succeeded")
		}
		if got := must(t, direct.Get(ctx, "n")).Val(); got != "1" {
			t.Fatalf("backend counter = %q, want 1", got)
		}
		if got := must(t, c.Incr(ctx, "n")).Val(); got != 2 { // one-shot
			t.Fatalf("INCR after the fault = %d, want 2", got)
		}

		// In a pipeline exactly the matching command is hit, later ones never run.
		p.DropReply("INCR")
		cmds, err := c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.Set(ctx, "a", "1", 0)
			pipe.Incr(ctx, "n")
			pipe.Set(ctx, "b", "1", 0)
			return nil
		})
		// go-redis marks every command of a failed pipeline as failed, but
		// keeps the value of those whose reply it did read.
		if err == nil || cmds[0].(*redis.StatusCmd).Val() != "OK" {
			t.Fatalf("pipeline: err = %v, cmds = %v", err, cmds)
		}
		if got := must(t, direct.MGet(ctx, "a", "n", "b")).Val(); got[0] != "1" || got[1] != "3" || got[2] != nil {
			t.Fatalf("backend a, n, b = %v, want [1 3 <nil>]", got)
		}
	})
}

func TestProxyCutBefore(t *testing.T) {
	eachBackend(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		p := redistest.NewProxy(t, addr)
		c := newClient(t, p.Addr())
		direct := newClient(t, addr)
		must(t, c.Ping(ctx))

		p.CutBefore("", 1)
		cmds, err := c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.Set(ctx, "a", "1", 0)
			pipe.Set(ctx, "b", "1", 0)
			pipe.Set(ctx, "c", "1", 0)
			return nil
		})
		// go-redis marks every command of a failed pipeline as failed, but
		// keeps the value of those whose reply it did read.
		if err == nil || cmds[0].(*redis.StatusCmd).Val() != "OK" {
			t.Fatalf("pipeline: err = %v, cmds = %v", err, cmds)
		}
		if got := must(t, direct.Exists(ctx, "a")).Val(); got != 1 {
			t.Fatal("a was not set")
		}
		if got := must(t, direct.Exists(ctx, "b", "c")).Val(); got != 0 {
			t.Fatalf("%d of b, c were set", got)
		}

		// Named match with skip: the second GET is cut, the proxy recovers.
		p.CutBefore("GET", 1)
		must(t, c.Get(ctx, "a"))
		if err := c.Get(ctx, "a").Err(); err == nil {
			t.Fatal("second GET was not cut")
		}
		if got := must(t, c.Get(ctx, "a")).Val(); got != "1" {
			t.Fatalf("GET after the cut = %q", got)
		}
		if n := p.Commands(); n["SET"] != 1 || n["GET"] != 2 {
			t.Fatalf("Commands() = %v, want SET:1 GET:2", n)
		}
	})
}

func TestProxyDisarm(t *testing.T) {
	eachBackend(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		p := redistest.NewProxy(t, addr)
		c := newClient(t, p.Addr())
		must(t, c.Ping(ctx))

		p.CutBefore("GET", 0)
		p.DropReply("SET")
		if !p.Disarm() {
			t.Fatal("Disarm() = false with two faults armed")
		}
		if p.Disarm() {
			t.Fatal("Disarm() = true once disarmed")
		}
		must(t, c.Set(ctx, "a", "1", 0))
		if got := must(t, c.Get(ctx, "a")).Val(); got != "1" {
			t.Fatalf("GET after Disarm = %q, want 1", got)
		}
		p.CutBefore("GET", 0)
		if err := c.Get(ctx, "a").Err(); err == nil {
			t.Fatal("GET was not cut")
		}
		if p.Disarm() {
			t.Fatal("Disarm() = true after the fault fired")
		}
	})
}

func TestProxyDelay(t *testing.T) {
	eachBackend(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		p := redistest.NewProxy(t, addr)
		c := newClient(t, p.Addr(), func(o *redis.Options) {
			// Long enough for a busy machine to dial and answer in time,
			// well short of the delay.
			o.ReadTimeout = 500 * time.Millisecond
			o.PoolSize = 1
		})
		direct := newClient(t, addr)
		must(t, direct.MSet(ctx, "k1", "v1", "k2", "v2"))
		must(t, c.Ping(ctx))

		p.Delay(2 * time.Second)
		err := c.Get(ctx, "k1").Err()
		var nerr net.Error
		if !errors.As(err, &nerr) || !nerr.Timeout() {
			t.Fatalf("delayed GET: err = %v, want a timeout", err)
		}
		p.Delay(0)
		if got := must(t, c.Get(ctx, "k2")).Val(); got != "v2" {
			t.Fatalf("GET k2 = %q, want v2 (a stale reply?)", got)
		}

		slow := newClient(t, p.Addr())
		must(t, slow.Ping(ctx))
		p.Delay(100 * time.Millisecond)
		start := time.Now()
		if got := must(t, slow.Get(ctx, "k1")).Val(); got != "v1" {
			t.Fatalf("GET k1 = %q", got)
		}
		if d := time.Since(start); d < 100*time.Millisecond {
			t.Fatalf("reply came after %v, want >= 100ms", d)
		}
	})
}

func TestProxyBlackhole(t *testing.T) {
	eachBackend(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		p := redistest.NewProxy(t, addr)
		opt := func(o *redis.Options) { o.ContextTimeoutEnabled = true }
		c := newClient(t, p.Addr(), opt)
		must(t, c.Set(ctx, "k", "v", 0))

		p.Blackhole(true)
		for _, cl := range []*redis.Client{c, newClient(t, p.Addr(), opt)} { // existing and new connections
			tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			start := time.Now()
			err := cl.Get(tctx, "k").Err()
			cancel()
			if err == nil {
				t.Fatal("GET through a blackhole succeeded")
			}
			if d := time.Since(start); d > time.Second {
				t.Fatalf("blackholed GET failed only after %v", d)
			}
		}
		if n := p.Commands()["GET"]; n != 0 {
			t.Fatalf("%d GETs were forwarded through the blackhole", n)
		}

		p.Blackhole(false)
		if got := must(t, c.Get(ctx, "k")).Val(); got != "v" {
			t.Fatalf("GET after the blackhole = %q", got)
		}
	})
}

func TestProxyCommandCounts(t *testing.T) {
	eachBackend(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		p := redistest.NewProxy(t, addr)
		c := newClient(t, p.Addr())
		must(t, c.Incr(ctx, "n"))
		p.ResetCounts()
		if n := p.Commands(); len(n) != 0 {
			t.Fatalf("Commands() after ResetCounts = %v", n)
		}

		script := redis.NewScript(`return redis.call("INCR", KEYS[1])`)
		for range 2 {
			must(t, script.Run(ctx, c, []string{"n"})) // EVALSHA, NOSCRIPT -> EVAL, then EVALSHA
		}
		must(t, c.Incr(ctx, "n"))
		pipelined(t, false, c, func(pipe redis.Pipeliner) {
			pipe.Incr(ctx, "n")
			pipe.Get(ctx, "n")
		})
		n := p.Commands()
		want := map[string]int{"EVALSHA": 2, "EVAL": 1, "INCR": 2, "GET": 1}
		for k, v := range want {
			if n[k] != v {
				t.Fatalf("Commands() = %v, want %v", n, want)
			}
		}
		n["INCR"] = 100 // a copy
		if p.Commands()["INCR"] != 2 {
			t.Fatal("Commands() does not return a copy")
		}
	})
}

func TestProxyClose(t *testing.T) {
	eachBackend(t, func(t *testing.T, addr string) {
		ctx := context.Background()
		p := redistest.NewProxy(t, addr)
		c := newClient(t, p.Addr())
		must(t, c.Ping(ctx))
		p.Delay(time.Minute)
		errc := make(chan error, 1)
		go func() { errc <- c.Get(ctx, "k").Err() }()
		time.Sleep(50 * time.Millisecond) // let the GET reach the proxy

		start := time.Now()
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if err := <-errc; err == nil || errors.Is(err, redis.Nil) {
			t.Fatalf("GET during Close: err = %v", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("Close took %v", d)
		}
		if cn, err := net.Dial("tcp", p.Addr()); err == nil {
			cn.Close()
			t.Fatal("proxy still listening after Close")
		}
	})
}
