package rueidis_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/benchkit"
	"github.com/quotagate/limiter/internal/redistest"
	rueidisstore "github.com/quotagate/limiter/store/rueidis"
	"github.com/quotagate/limiter/strategy"
)

// The FixedWindow benchmarks compare a Limiter (FixedWindow through the
// rueidis adapter) with what a user writes by hand: an EVALSHA of the same
// script through the same rueidis client, on the same keys, against a real
// redis-server started for the run. The ratio benchmark also measures a
// hand-written EVALSHA through go-redis, to compare the clients. The
// machinery is in internal/benchkit.
//
//	go test -run '^$' -bench FixedWindow -benchtime 2s ./store/rueidis/

const (
	// goredisPoolSize holds the 64 callers of the widest level.
	goredisPoolSize = 64
	// benchRawSuffix is the rule part of benchLimit's key, written out as a
	// hand-written caller would; newBenchEnv checks it against limiter.Key.
	benchRawSuffix = "}:1000ms"
)

// benchCallers are the concurrency levels: exactly this many goroutines call
// at once.
var benchCallers = []int{1, 16, 64}

// benchRate is never reached, so every call is admitted and all variants
// do the same work on the server (GET, PTTL, INCRBY; a SET once a second).
const benchRate = 1 << 40

type benchEnv struct {
	*benchkit.Kit
	c   rueidis.Client
	rdb *redis.Client
	lim *limiter.Limiter
	sha string
	// prefix, rate and windowMs are run-time values, as a hand-written
	// caller has them from its configuration.
	prefix   string
	rate     int64
	windowMs int64
}

// newBenchEnv starts a redis-server, loads the script, builds one rueidis
// client with the documented options (shared by the raw and limiter
// variants), a go-redis client, and the Limiter, and checks that all
// variants count on the same key.
func newBenchEnv(b *testing.B) *benchEnv { return newBenchEnvWith(b, options) }

// newBenchEnvWith is newBenchEnv with the client options opts returns for
// the server's address.
func newBenchEnvWith(b *testing.B, opts func(addr string) rueidis.ClientOption) *benchEnv {
	b.Helper()
	ctx := context.Background()
	srv := redistest.StartServer(b)
	c, err := rueidis.NewClient(opts(srv.Addr()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: goredisPoolSize})
	b.Cleanup(func() { _ = rdb.Close() })

	script := strategy.FixedWindowScript()
	sha, err := c.Do(ctx, c.B().ScriptLoad().Script(script.Source()).Build()).ToString()
	if err != nil {
		b.Fatalf("SCRIPT LOAD: %v", err)
	}
	if sha != script.Hash() {
		b.Fatalf("SCRIPT LOAD returned %s, Script.Hash is %s", sha, script.Hash())
	}
	lim, err := limiter.New(rueidisstore.New(c), strategy.NewFixedWindow())
	if err != nil {
		b.Fatal(err)
	}
	e := &benchEnv{
		c:        c,
		rdb:      rdb,
		lim:      lim,
		sha:      sha,
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

	// All variants must count on one counter: a call of each on a fresh
	// subject leaves rate-3.
	const check = "bench-check"
	if err := c.Do(ctx, c.B().Del().Key(e.prefix+":{"+check+benchRawSuffix).Build()).Error(); err != nil {
		b.Fatal(err)
	}
	if err := e.raw(ctx, check); err != nil {
		b.Fatal(err)
	}
	if err := e.goredisRaw(ctx, check); err != nil {
		b.Fatal(err)
	}
	res, err := lim.Allow(ctx, check, l)
	if err != nil {
		b.Fatal(err)
	}
	if res.Remaining != e.rate-3 {
		b.Fatalf("after one call of each variant, remaining = %d, want %d: the variants use different counters", res.Remaining, e.rate-3)
	}

	// Open go-redis's whole pool now, not while timing the 64-caller level.
	conns := make([]*redis.Conn, goredisPoolSize)
	for i := range conns {
		conns[i] = rdb.Conn()
		if err := conns[i].Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
	for _, cn := range conns {
		_ = cn.Close()
	}
	// rueidis dials its pipelining connections lazily, on first use of
	// each: make every one of them carry a call before timing.
	if _, err := e.FanOut(e.MaxCallers(), benchkit.Counted(1000), e.raw); err != nil {
		b.Fatal(err)
	}
	return e
}

func (e *benchEnv) limit() limiter.Limit { return limiter.PerSecond(e.rate) }

// raw is the hand-written call through rueidis: the key built per call,
// EVALSHA of the FixedWindow script, the reply (one integer,
// reset_ms·(2·rate+1) + count) read, admitted when the count is within the
// rate.
func (e *benchEnv) raw(ctx context.Context, subject string) error {
	key := e.prefix + ":{" + subject + benchRawSuffix
	cmd := e.c.B().Evalsha().Sha1(e.sha).Numkeys(1).Key(key).
		Arg(strconv.FormatInt(e.rate, 10), strconv.FormatInt(e.windowMs, 10)).Build()
	v, err := e.c.Do(ctx, cmd).AsInt64()
	if err != nil {
		return fmt.Errorf("raw: %w", err)
	}
	if v%(2*e.rate+1) > e.rate {
		return errors.New("raw: denied")
	}
	return nil
}

// goredisRaw is the same hand-written call through go-redis.
func (e *benchEnv) goredisRaw(ctx context.Context, subject string) error {
	key := e.prefix + ":{" + subject + benchRawSuffix
	v, err := e.rdb.EvalSha(ctx, e.sha, []string{key}, e.rate, e.windowMs).Int64()
	if err != nil {
		return fmt.Errorf("go-redis raw: %w", err)
	}
	if v%(2*e.rate+1) > e.rate {
		return fmt.Errorf("go-redis raw: denied (%d)", v)
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

// BenchmarkFixedWindowRatio compares the variants within one invocation in
// interleaved rounds and reports ratio-cN, extra-allocs-c1, extra-B-c1,
// allocs/op and B/op as benchkit.Kit.RunRatio describes, plus
// vs-goredis-raw-c64: limiter (on rueidis) decisions/s over a hand-written
// go-redis EVALSHA's (PoolSize 64) with 64 callers, run in the same rounds.
// One measurement takes about 10 s; a -benchtime above that repeats it and
// pools the rounds. Skipped with -short.
func BenchmarkFixedWindowRatio(b *testing.B) {
	if testing.Short() {
		b.Skip("takes about 10 s")
	}
	e := newBenchEnv(b)
	e.RunRatio(b, benchkit.Variant{Name: "raw", Decide: e.raw}, benchkit.Variant{Name: "limiter", Decide: e.allow},
		&benchkit.Extra{
			Variant: benchkit.Variant{Name: "goredis-raw", Decide: e.goredisRaw},
			Callers: 64,
			Metric:  "vs-goredis-raw-c64",
		})
}

// BenchmarkAllowMany compares Limiter.AllowMany, 16 decisions per call
// (FixedWindow, every one admitted, 16 subjects per call) through rueidis
// at 16 callers, with redis-benchmark's pipelined EVALSHA of the same
// script (-c 16 -P 16) on the same server, in alternating rounds:
// many-x-redis-benchmark is the ratio of their decisions per second.
//
//	go test -run '^$' -bench AllowMany -benchtime 1x ./store/rueidis/
func BenchmarkAllowMany(b *testing.B) {
	const callers, perCall, rounds = 16, 16, 4
	e := newBenchEnv(b)
	addr := e.rdb.Options().Addr
	l := e.limit()
	many := benchkit.Many(e.lim, benchkit.ManyAsks(callers, perCall, l))
	for range b.N {
		var mine, theirs []float64
		for range rounds {
			n, d, err := e.Timed(callers, time.Second, many)
			if err != nil {
				b.Fatal(err)
			}
			mine = append(mine, float64(n*perCall)/d.Seconds())
			rps, err := benchkit.RedisBenchmark(addr, callers, perCall, 200000,
				"EVALSHA", e.sha, "1", "limiter:{rb:__rand_int__}:1000ms", strconv.FormatInt(e.rate, 10), "1000")
			if err != nil {
				b.Fatal(err)
			}
			theirs = append(theirs, rps)
		}
		b.ReportMetric(benchkit.Median(mine), "many-decisions/s")
		b.ReportMetric(benchkit.Median(theirs), "redis-benchmark-P16/s")
		b.ReportMetric(benchkit.Median(mine)/benchkit.Median(theirs), "many-x-redis-benchmark")
	}
}

// BenchmarkCheapestRatio compares the library's cheapest exact strategy,
// AlignedWindow through a Limiter on the rueidis adapter, with the minimal
// hand-written fixed window (INCR, PEXPIRE when new, the count returned) as
// a raw EVALSHA through the same client, in interleaved rounds at 1, 16
// and 64 callers: ratio-cN is AlignedWindow's decisions/s over the minimal
// script's (RunRatio's metrics, with the minimal script as raw).
//
//	go test -run '^$' -bench CheapestRatio -benchtime 1x ./store/rueidis/
func BenchmarkCheapestRatio(b *testing.B) { cheapestRatio(b, newBenchEnv(b)) }

// BenchmarkCheapestRatioFlushDelay is BenchmarkCheapestRatio with the
// client's MaxFlushDelay at 20 µs for both variants: rueidis then pauses
// after each write, so that the next carries more calls. By default it
// writes whenever no further call is queued, so that the time a caller
// takes between a reply and its next call decides how many calls each
// write carries, and so the CPU each call costs.
//
//	go test -run '^$' -bench CheapestRatioFlushDelay -benchtime 1x ./store/rueidis/
func BenchmarkCheapestRatioFlushDelay(b *testing.B) {
	cheapestRatio(b, newBenchEnvWith(b, func(addr string) rueidis.ClientOption {
		o := options(addr)
		o.MaxFlushDelay = 20 * time.Microsecond
		return o
	}))
}

func cheapestRatio(b *testing.B, e *benchEnv) {
	ctx := context.Background()
	minimal := benchkit.MinimalScript()
	if err := e.c.Do(ctx, e.c.B().ScriptLoad().Script(minimal.Source()).Build()).Error(); err != nil {
		b.Fatal(err)
	}
	lim, err := limiter.New(rueidisstore.New(e.c), strategy.NewAlignedWindow(), limiter.WithPrefix("aligned"))
	if err != nil {
		b.Fatal(err)
	}
	window := strconv.FormatInt(e.windowMs, 10)
	raw := benchkit.Variant{Name: "minimal", Decide: func(ctx context.Context, subject string) error {
		cmd := e.c.B().Evalsha().Sha1(minimal.Hash()).Numkeys(1).Key("minimal:{" + subject + "}").Arg(window).Build()
		return e.c.Do(ctx, cmd).Error()
	}}
	e.RunRatio(b, raw, benchkit.AlignedWindow(lim, e.limit()), nil)
}
