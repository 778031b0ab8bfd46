package redigo_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gomodule/redigo/redis"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/benchkit"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store/redigo"
	"github.com/quotagate/limiter/strategy"
)

// The FixedWindow benchmarks compare a Limiter (FixedWindow through the
// redigo adapter) with what a user writes by hand: an EVALSHA of the same
// script on a connection of the same pool, on the same keys, against a real
// redis-server started for the run. The machinery is in internal/benchkit.
//
//	go test -run '^$' -bench FixedWindow -benchtime 2s ./store/redigo/

const (
	// benchPoolSize holds the 64 callers of the widest level (MaxActive
	// and MaxIdle).
	benchPoolSize = 64
	// benchRawSuffix is the rule part of benchLimit's key, written out as a
	// hand-written caller would; newBenchEnv checks it against limiter.Key.
	benchRawSuffix = "}:1000ms"
)

// benchCallers are the concurrency levels: exactly this many goroutines call
// at once.
var benchCallers = []int{1, 16, 64}

// benchRate is never reached, so every call is admitted and both variants
// do the same work on the server (GET, PTTL, INCRBY; a SET once a second).
const benchRate = 1 << 40

type benchEnv struct {
	*benchkit.Kit
	pool *redis.Pool
	lim  *limiter.Limiter
	// prefix, rate and windowMs are run-time values, as a hand-written
	// caller has them from its configuration.
	prefix   string
	rate     int64
	windowMs int64
}

// newBenchEnv starts a redis-server, loads the script, builds one pool (the
// recommended settings, shared by both variants) and the Limiter, checks
// that both variants count on the same key and opens benchPoolSize
// connections.
func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	ctx := context.Background()
	srv := redistest.StartServer(b)
	pool := newPool(srv.Addr(), benchPoolSize)
	b.Cleanup(func() { _ = pool.Close() })

	script := strategy.FixedWindowScript()
	c := pool.Get()
	sha, err := redis.String(c.Do("SCRIPT", "LOAD", script.Source()))
	_ = c.Close()
	if err != nil {
		b.Fatalf("SCRIPT LOAD: %v", err)
	}
	if sha != script.Hash() {
		b.Fatalf("SCRIPT LOAD returned %s, Script.Hash is %s", sha, script.Hash())
	}
	lim, err := limiter.New(redigo.New(pool), strategy.NewFixedWindow())
	if err != nil {
		b.Fatal(err)
	}
	e := &benchEnv{
		pool:     pool,
		lim:      lim,
		prefix:   limiter.DefaultPrefix,
		rate:     benchRate,
		windowMs: 1000,
	}
	l := e.limit()
	e.Kit = benchkit.New(b, benchCallers, func(s string) error {
		want, err := limiter.Key(e.prefix, s, l)
		if err != nil {
			return err
		}
		if got := e.prefix + ":{" + s + benchRawSuffix; got != want {
			return fmt.Errorf("raw key %q, the limiter uses %q", got, want)
		}
		return nil
	})

	// Both variants must count on one counter: a raw call then a limiter
	// call on a fresh subject leave rate-2.
	const check = "bench-check"
	c = pool.Get()
	_, err = c.Do("DEL", e.prefix+":{"+check+benchRawSuffix)
	_ = c.Close()
	if err != nil {
		b.Fatal(err)
	}
	if err := e.raw(ctx, check); err != nil {
		b.Fatal(err)
	}
	res, err := lim.Allow(ctx, check, l)
	if err != nil {
		b.Fatal(err)
	}
	if res.Remaining != e.rate-2 {
		b.Fatalf("after one raw and one limiter call, remaining = %d, want %d: the variants use different counters", res.Remaining, e.rate-2)
	}

	// Open the whole pool now, not while timing the 64-caller level.
	conns := make([]redis.Conn, benchPoolSize)
	for i := range conns {
		if conns[i], err = pool.GetContext(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := conns[i].Do("PING"); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range conns {
		_ = c.Close()
	}
	if n := pool.Stats().IdleCount; n < benchPoolSize {
		b.Logf("pool holds %d idle connections after warm-up, want %d", n, benchPoolSize)
	}
	return e
}

func (e *benchEnv) limit() limiter.Limit { return limiter.PerSecond(e.rate) }

// raw is the hand-written call, as redigo's documentation shows it: a
// connection from the pool, the key built per call, EVALSHA of the
// FixedWindow script, the reply (one integer, reset_ms·(2·rate+1) + count)
// read, the connection closed (back to the pool).
func (e *benchEnv) raw(_ context.Context, subject string) error {
	key := e.prefix + ":{" + subject + benchRawSuffix
	c := e.pool.Get()
	v, err := redis.Int64(c.Do("EVALSHA", strategy.FixedWindowScript().Hash(), 1, key, e.rate, e.windowMs))
	_ = c.Close()
	if err != nil {
		return fmt.Errorf("raw: %w", err)
	}
	if count := v % (2*e.rate + 1); count > e.rate {
		return errors.New("raw: denied")
	}
	return nil
}

// allow is the same decision through the Limiter.
func (e *benchEnv) allow(ctx context.Context, subject string) error {
	res, err := e.lim.Allow(ctx, subject, limiter.PerSecond(e.rate))
	if err != nil {
		return fmt.Errorf("limiter: %w", err)
	}
	if !res.Allowed {
		return errors.New("limiter: denied")
	}
	return nil
}

// BenchmarkFixedWindow measures one decision (cost 1, one limit) by 1, 16
// and 64 concurrent callers, by hand (raw) and through the Limiter.
func BenchmarkFixedWindow(b *testing.B) {
	e := newBenchEnv(b)
	e.RunFixedWindow(b, []benchkit.Variant{{Name: "raw", Decide: e.raw}, {Name: "limiter", Decide: e.allow}})
}

// BenchmarkFixedWindowRatio compares the two variants within one invocation
// in interleaved rounds and reports ratio-cN, extra-allocs-c1, extra-B-c1,
// allocs/op and B/op as benchkit.Kit.RunRatio describes. The Limiter's
// store is redigo.New's default, whose concurrent calls share pipelines;
// the raw calls each take a connection of their own. One measurement
// takes about 10 s; a -benchtime above that repeats it and pools the
// rounds. Skipped with -short.
func BenchmarkFixedWindowRatio(b *testing.B) {
	if testing.Short() {
		b.Skip("takes about 10 s")
	}
	e := newBenchEnv(b)
	e.RunRatio(b, benchkit.Variant{Name: "raw", Decide: e.raw}, benchkit.Variant{Name: "limiter", Decide: e.allow}, nil)
}

// BenchmarkFixedWindowRatioUnshared is BenchmarkFixedWindowRatio with every
// call of the Limiter on a connection of its own
// (redigo.WithSharedPipelines(0)), as the raw calls go: the Limiter's own
// cost around the same round trips. Skipped with -short.
func BenchmarkFixedWindowRatioUnshared(b *testing.B) {
	if testing.Short() {
		b.Skip("takes about 10 s")
	}
	e := newBenchEnv(b)
	lim, err := limiter.New(redigo.New(e.pool, redigo.WithSharedPipelines(0)), strategy.NewFixedWindow())
	if err != nil {
		b.Fatal(err)
	}
	unshared := &benchEnv{Kit: e.Kit, pool: e.pool, lim: lim, prefix: e.prefix, rate: e.rate, windowMs: e.windowMs}
	e.RunRatio(b, benchkit.Variant{Name: "raw", Decide: e.raw}, benchkit.Variant{Name: "limiter-unshared", Decide: unshared.allow}, nil)
}

// BenchmarkCheapestRatio compares the library's cheapest exact strategy,
// AlignedWindow through a Limiter on the redigo adapter, with the minimal
// hand-written fixed window (INCR, PEXPIRE when new, the count returned) as
// a raw EVALSHA on a connection of the same pool, in interleaved rounds at
// 1, 16 and 64 callers: ratio-cN is AlignedWindow's decisions/s over the
// minimal script's (RunRatio's metrics, with the minimal script as raw).
//
//	go test -run '^$' -bench CheapestRatio -benchtime 1x ./store/redigo/
func BenchmarkCheapestRatio(b *testing.B) {
	e := newBenchEnv(b)
	minimal := benchkit.MinimalScript()
	c := e.pool.Get()
	_, err := c.Do("SCRIPT", "LOAD", minimal.Source())
	_ = c.Close()
	if err != nil {
		b.Fatal(err)
	}
	lim, err := limiter.New(redigo.New(e.pool), strategy.NewAlignedWindow(), limiter.WithPrefix("aligned"))
	if err != nil {
		b.Fatal(err)
	}
	raw := benchkit.Variant{Name: "minimal", Decide: func(_ context.Context, subject string) error {
		c := e.pool.Get()
		_, err := redis.Int64(c.Do("EVALSHA", minimal.Hash(), 1, "minimal:{"+subject+"}", e.windowMs))
		_ = c.Close()
		return err
	}}
	e.RunRatio(b, raw, benchkit.AlignedWindow(lim, e.limit()), nil)
}

// BenchmarkClusterSharing compares FixedWindow through a Limiter on a
// three-master Cluster (one redisc.Cluster), the calls sharing pipelines
// per master (the default) and each a round trip of its own
// (WithSharedPipelines(0)), in interleaved rounds at 16 and 64 callers:
// shared-x-unshared-cN is the median of the rounds' ratios of their
// decisions/s. All masters run on this machine, so they take CPU from the
// client as one server does.
//
//	go test -run '^$' -bench ClusterSharing -benchtime 1x ./store/redigo/
func BenchmarkClusterSharing(b *testing.B) {
	c := redistest.StartCluster(b)
	cl := clusterFor(c.Addrs())
	b.Cleanup(func() { _ = cl.Close() })
	create := cl.CreatePool
	cl.CreatePool = func(addr string, opts ...redis.DialOption) (*redis.Pool, error) {
		p, err := create(addr, opts...)
		if p != nil {
			p.MaxActive, p.MaxIdle = benchPoolSize, benchPoolSize
		}
		return p, err
	}
	if err := cl.Refresh(); err != nil {
		b.Fatal(err)
	}
	k := benchkit.New(b, []int{16, 64}, nil)
	l := limiter.PerSecond(benchRate)
	variant := func(name string, opts ...redigo.Option) benchkit.Variant {
		lim, err := limiter.New(redigo.New(redigo.Cluster(cl), opts...), strategy.NewFixedWindow(), limiter.WithPrefix("cluster-"+name))
		if err != nil {
			b.Fatal(err)
		}
		return benchkit.Admitted(name, lim, l)
	}
	k.RunSharing(b, variant("unshared", redigo.WithSharedPipelines(0)), variant("shared"))
}
