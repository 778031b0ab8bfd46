package goredis_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/benchkit"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// The FixedWindow benchmarks compare a Limiter (FixedWindow through the
// go-redis adapter) with what a user writes by hand: an EVALSHA of the same
// script through the same client, on the same keys, against a real
// redis-server started for the run. The machinery is in internal/benchkit.
//
//	go test -run '^$' -bench FixedWindow -benchtime 2s ./store/goredis/

const (
	// benchPoolSize holds the 64 callers of the widest level.
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
	rdb *redis.Client
	lim *limiter.Limiter
	// prefix, rate and windowMs are run-time values, as a hand-written
	// caller has them from its configuration.
	prefix   string
	rate     int64
	windowMs int64
}

// newBenchEnv starts a redis-server, loads the script, builds one client
// (shared by both variants) and the Limiter, checks that both variants count
// on the same key and opens benchPoolSize connections.
func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	ctx := context.Background()
	srv := redistest.StartServer(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: benchPoolSize})
	b.Cleanup(func() { _ = rdb.Close() })

	script := strategy.FixedWindowScript()
	sha, err := rdb.ScriptLoad(ctx, script.Source()).Result()
	if err != nil {
		b.Fatalf("SCRIPT LOAD: %v", err)
	}
	if sha != script.Hash() {
		b.Fatalf("SCRIPT LOAD returned %s, Script.Hash is %s", sha, script.Hash())
	}
	lim, err := limiter.New(goredis.New(rdb), strategy.NewFixedWindow())
	if err != nil {
		b.Fatal(err)
	}
	e := &benchEnv{
		rdb:      rdb,
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
	if err := rdb.Del(ctx, e.prefix+":{"+check+benchRawSuffix).Err(); err != nil {
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
	conns := make([]*redis.Conn, benchPoolSize)
	for i := range conns {
		conns[i] = rdb.Conn()
		if err := conns[i].Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range conns {
		_ = c.Close()
	}
	if n := rdb.PoolStats().TotalConns; n < benchPoolSize {
		b.Logf("pool holds %d connections after warm-up, want %d", n, benchPoolSize)
	}
	return e
}

func (e *benchEnv) limit() limiter.Limit { return limiter.PerSecond(e.rate) }

// raw is the hand-written call: the key built per call, EVALSHA of the
// FixedWindow script, the reply (for one limit that writes, here: one
// integer, reset_ms·(2·rate+1) + count) read, admitted when the count is
// within the rate.
func (e *benchEnv) raw(ctx context.Context, subject string) error {
	key := e.prefix + ":{" + subject + benchRawSuffix
	v, err := e.rdb.EvalSha(ctx, strategy.FixedWindowScript().Hash(), []string{key}, e.rate, e.windowMs).Int64()
	if err != nil {
		return fmt.Errorf("raw: %w", err)
	}
	if v%(2*e.rate+1) > e.rate {
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
// store is goredis.New's default, whose concurrent calls share pipelines;
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
// (goredis.WithSharedPipelines(0)), as the raw calls go: the Limiter's own
// cost around the same round trips. Skipped with -short.
func BenchmarkFixedWindowRatioUnshared(b *testing.B) {
	if testing.Short() {
		b.Skip("takes about 10 s")
	}
	e := newBenchEnv(b)
	lim, err := limiter.New(goredis.New(e.rdb, goredis.WithSharedPipelines(0)), strategy.NewFixedWindow())
	if err != nil {
		b.Fatal(err)
	}
	unshared := &benchEnv{Kit: e.Kit, rdb: e.rdb, lim: lim, prefix: e.prefix, rate: e.rate, windowMs: e.windowMs}
	e.RunRatio(b, benchkit.Variant{Name: "raw", Decide: e.raw}, benchkit.Variant{Name: "limiter-unshared", Decide: unshared.allow}, nil)
}

// tripStore counts the round trips of the decisions made through it:
// one per Do, EvalSha and Eval; for a transaction, the WATCH, each Tx.Do
// and Tx.Exec, and the UNWATCH that this adapter sends when fn ends
// without a completed EXEC.
type tripStore struct {
	store.Store
	w     store.Watcher
	trips atomic.Int64
}

func (s *tripStore) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	s.trips.Add(1)
	return s.Store.Do(ctx, cmds...)
}

func (s *tripStore) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	s.trips.Add(1)
	return s.Store.EvalSha(ctx, sha, keys, args)
}

func (s *tripStore) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	s.trips.Add(1)
	return s.Store.Eval(ctx, src, keys, args)
}

func (s *tripStore) Watch(ctx context.Context, keys []string, fn func(store.Tx) error) error {
	s.trips.Add(1) // WATCH
	execed := false
	err := s.w.Watch(ctx, keys, func(tx store.Tx) error {
		return fn(tripTx{tx, s, &execed})
	})
	if !execed {
		s.trips.Add(1) // UNWATCH
	}
	return err
}

type tripTx struct {
	store.Tx
	s      *tripStore
	execed *bool
}

func (t tripTx) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	t.s.trips.Add(1)
	return t.Tx.Do(ctx, cmds...)
}

func (t tripTx) Exec(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	t.s.trips.Add(1)
	rs, err := t.Tx.Exec(ctx, cmds...)
	*t.execed = err == nil || errors.Is(err, store.ErrTxAborted)
	return rs, err
}

// BenchmarkStrategies compares the strategies this module ships on a real
// redis-server, 16 concurrent callers, each on its own few keys, through
// the go-redis adapter: decisions/s, and round-trips/op counted at the
// store. "admitted": the rate is never reached; "denied": every key is full
// (Bucketed takes a denied request back in a second round trip).
//
//	go test -run '^$' -bench Strategies -benchtime 2s ./store/goredis/
func BenchmarkStrategies(b *testing.B) {
	const callers = 16
	e := newBenchEnv(b)
	strategies := []struct {
		name string
		s    limiter.Strategy
	}{
		{"FixedWindow", strategy.NewFixedWindow()},
		{"Bucketed", strategy.NewBucketed()},
		{"Optimistic", strategy.NewOptimistic()},
		{"GCRA", strategy.NewGCRA()},
		{"TokenBucket", strategy.NewTokenBucket()},
		{"SlidingWindow", strategy.NewSlidingWindow()},
		{"SlidingLog", strategy.NewSlidingLog()},
	}
	for _, sp := range strategies {
		for _, load := range []string{"admitted", "denied"} {
			b.Run(sp.name+"/"+load, func(b *testing.B) {
				st := &tripStore{Store: goredis.New(e.rdb)}
				st.w = st.Store.(store.Watcher)
				lim, err := limiter.New(st, sp.s, limiter.WithPrefix("bench-"+sp.name+"-"+load))
				if err != nil {
					b.Fatal(err)
				}
				l, want := limiter.PerSecond(e.rate), true
				switch sp.name {
				case "GCRA":
					// GCRA holds at most one unit per microsecond; a
					// burst no run uses up.
					l = limiter.Per(1<<30, limiter.MaxPeriod)
				case "TokenBucket":
					// a bucket no run empties (burst × period in µs
					// within 2^51)
					l = limiter.PerSecond(1_000_000)
				case "SlidingWindow":
					// its largest rate
					l = limiter.PerSecond(1<<26 - 1)
				case "SlidingLog":
					// its largest rate, in a window each key's log
					// holds a few hundred units of
					l = limiter.PerSecond(strategy.SlidingLogMaxRate)
				}
				if load == "denied" {
					l, want = limiter.PerDay(1), false
				}
				f := func(ctx context.Context, subject string) error {
					r, err := lim.Allow(ctx, subject, l)
					if err != nil {
						return err
					}
					if r.Allowed != want {
						return fmt.Errorf("%s: allowed=%v, want %v", subject, r.Allowed, want)
					}
					return nil
				}
				// One call per key first: scripts loaded, clocks synced, and
				// for "denied" every key full.
				for w := range callers {
					for _, s := range e.Subjects[w] {
						if _, err := lim.Allow(context.Background(), s, l); err != nil {
							b.Fatal(err)
						}
					}
				}
				st.trips.Store(0)
				more := benchkit.Counted(int64(b.N))
				b.ResetTimer()
				_, err = e.FanOut(callers, more, f)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
				b.ReportMetric(float64(st.trips.Load())/float64(b.N), "round-trips/op")
			})
		}
	}
}

// BenchmarkCheapestRatio compares the library's cheapest exact strategy,
// AlignedWindow through a Limiter on the go-redis adapter, with the minimal
// hand-written fixed window (INCR, PEXPIRE when new, the count returned) as
// a raw EVALSHA through the same client, in interleaved rounds at 1, 16
// and 64 callers: ratio-cN is AlignedWindow's decisions/s over the minimal
// script's (RunRatio's metrics, with the minimal script as raw), measured
// as for the rueidis and redigo adapters.
//
//	go test -run '^$' -bench CheapestRatio -benchtime 1x ./store/goredis/
func BenchmarkCheapestRatio(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	minimal := benchkit.MinimalScript()
	if err := e.rdb.ScriptLoad(ctx, minimal.Source()).Err(); err != nil {
		b.Fatal(err)
	}
	lim, err := limiter.New(goredis.New(e.rdb), strategy.NewAlignedWindow(), limiter.WithPrefix("aligned"))
	if err != nil {
		b.Fatal(err)
	}
	raw := benchkit.Variant{Name: "minimal", Decide: func(ctx context.Context, subject string) error {
		return e.rdb.EvalSha(ctx, minimal.Hash(), []string{"minimal:{" + subject + "}"}, e.windowMs).Err()
	}}
	e.RunRatio(b, raw, benchkit.AlignedWindow(lim, e.limit()), nil)
}

// BenchmarkStrategyRatios compares each strategy with FixedWindow on one
// redis-server through the go-redis adapter, every decision admitted: at 16
// callers, in interleaved rounds, its decisions/s over FixedWindow's
// (x-FixedWindow), and the server's time per decision (INFO commandstats
// usec_per_call of EVALSHA after a CONFIG RESETSTAT, each strategy alone
// for 250 ms in 6 interleaved rounds: the median, server-us-<name>, and
// the median of the rounds' ratios to FixedWindow's,
// server-x-FixedWindow). Beside them, the floor of a
// strategy whose state is read and written on the server's clock:
// "floor-TIME-GET-SET" makes a raw EVALSHA of a script that only calls
// TIME, GET and SET PX and decides nothing (benchkit.GCRAFloorScript), so
// its server-x-FixedWindow is the least such a strategy could cost the
// server (and, unshared, its x-FixedWindow the most it could reach through
// this client). "FixedWindow-control" is FixedWindow again on keys of its
// own: its ratios, which would be 1 on a quiet machine, show how far the
// run's noise moves the others. Two sub-benchmarks: "shared", the stores as goredis.New
// makes them (concurrent calls share pipelines, so the server's time
// weighs more), and "unshared" (goredis.WithSharedPipelines(0)), every
// call on its own connection, whose client work then weighs more. One
// measurement takes about two minutes; run it with -benchtime 1x.
//
//	go test -run '^$' -bench StrategyRatios -benchtime 1x ./store/goredis/
func BenchmarkStrategyRatios(b *testing.B) {
	const callers = 16
	e := newBenchEnv(b)
	type sut struct {
		name string
		s    limiter.Strategy
		l    limiter.Limit
	}
	suts := []sut{
		{"FixedWindow", strategy.NewFixedWindow(), limiter.PerSecond(e.rate)},
		// an emission interval of whole milliseconds, as most limits
		// have (its state is the key's expiry), and a burst no run uses;
		// 10 ms, so that a subject's next decision finds its key live,
		// as FixedWindow's does
		{"GCRA", strategy.NewGCRA(), limiter.Limit{Rate: 100, Period: time.Second, Burst: 1 << 30}},
		{"GCRA-us", strategy.NewGCRA(), limiter.Per(1<<30, limiter.MaxPeriod)},
		// as GCRA's: an interval of whole milliseconds (its state is
		// the key's expiry), one of 3333.3 µs (300/s: the tokens when
		// written and the expiry written in the key's value), both with
		// keys that live (a subject asks more often than its rate, into a
		// burst no run uses), and one of a microsecond (10⁶/s, whose keys
		// mostly expire, a millisecond after the call, before the next)
		{"TokenBucket", strategy.NewTokenBucket(), limiter.Limit{Rate: 100, Period: time.Second, Burst: 1 << 30}},
		{"TokenBucket-us", strategy.NewTokenBucket(), limiter.Limit{Rate: 300, Period: time.Second, Burst: 1 << 30}},
		{"TokenBucket-1us", strategy.NewTokenBucket(), limiter.PerSecond(1_000_000)},
		{"SlidingWindow", strategy.NewSlidingWindow(), limiter.PerSecond(1<<26 - 1)}, // its largest rate
		{"SlidingLog", strategy.NewSlidingLog(), limiter.PerSecond(strategy.SlidingLogMaxRate)},
		// FixedWindow again, on keys of its own: its ratio is the run's
		// noise, the error bar of every other ratio
		{"FixedWindow-control", strategy.NewFixedWindow(), limiter.PerSecond(e.rate)},
	}
	for _, m := range []struct {
		mode string
		opts []goredis.Option
	}{{"shared", nil}, {"unshared", []goredis.Option{goredis.WithSharedPipelines(0)}}} {
		mode, opts := m.mode, m.opts
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			variants := make([]benchkit.Variant, len(suts))
			for i, s := range suts {
				lim, err := limiter.New(goredis.New(e.rdb, opts...), s.s, limiter.WithPrefix("ratio-"+mode+"-"+s.name))
				if err != nil {
					b.Fatal(err)
				}
				variants[i] = benchkit.Variant{Name: s.name, Decide: func(ctx context.Context, subject string) error {
					r, err := lim.Allow(ctx, subject, s.l)
					if err == nil && !r.Allowed {
						err = fmt.Errorf("%s denied %s: %+v", s.name, subject, r)
					}
					return err
				}}
			}
			floor := benchkit.GCRAFloorScript()
			if err := e.rdb.ScriptLoad(ctx, floor.Source()).Err(); err != nil {
				b.Fatal(err)
			}
			variants = append(variants, benchkit.Variant{Name: "floor-TIME-GET-SET", Decide: func(ctx context.Context, subject string) error {
				return e.rdb.EvalSha(ctx, floor.Hash(), []string{"ratio-floor-" + mode + ":{" + subject + "}"}, "3").Err()
			}})
			for range b.N {
				tallies, ratios, err := e.Compare(callers, benchkit.RatioRounds, benchkit.RatioWarmUp, benchkit.RatioRoundTime, variants)
				if err != nil {
					b.Fatal(err)
				}
				for i, v := range variants {
					b.ReportMetric(tallies[i].Rate(), v.Name+"-decisions/s")
					if i > 0 {
						b.ReportMetric(benchkit.Median(ratios[i]), v.Name+"-x-FixedWindow")
					}
				}
				us, err := e.ServerRounds(callers, 6, 250*time.Millisecond, variants,
					func() error { return e.rdb.ConfigResetStat(ctx).Err() },
					func() (float64, error) { return evalshaMicros(ctx, e.rdb) })
				if err != nil {
					b.Fatal(err)
				}
				for i, v := range variants {
					b.ReportMetric(benchkit.Median(us[i]), v.Name+"-server-us")
					if i > 0 {
						b.ReportMetric(benchkit.Median(benchkit.RoundRatios(us[i], us[0])), v.Name+"-server-x-FixedWindow")
					}
				}
			}
		})
	}
}

// evalshaMicros reads the server's mean time per EVALSHA since the last
// CONFIG RESETSTAT.
func evalshaMicros(ctx context.Context, rdb *redis.Client) (float64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(rest), ",") {
			if v, ok := strings.CutPrefix(f, "usec_per_call="); ok {
				return strconv.ParseFloat(v, 64)
			}
		}
	}
	return 0, fmt.Errorf("no EVALSHA in INFO commandstats")
}

// BenchmarkDenyCache compares deciding a hot subject over its limit with
// the deny cache (limiter.WithDenyCache) and a hand-written EVALSHA of
// FixedWindow's script that Redis denies, on one redis-server through
// go-redis, at 16 callers in interleaved rounds: cached-x-raw is the
// cache's decisions/s over the raw EVALSHA's.
//
//	go test -run '^$' -bench DenyCache -benchtime 1x ./store/goredis/
func BenchmarkDenyCache(b *testing.B) {
	const callers = 16
	e := newBenchEnv(b)
	ctx := context.Background()
	l := limiter.PerHour(1)
	lim, err := limiter.New(goredis.New(e.rdb), strategy.NewFixedWindow(), limiter.WithPrefix("deny"), limiter.WithDenyCache(4096))
	if err != nil {
		b.Fatal(err)
	}
	// Every subject used up: one admitted call each, then denials.
	for w := range callers {
		for _, s := range e.Subjects[w] {
			for range 2 {
				if _, err := lim.Allow(ctx, s, l); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	sha := strategy.FixedWindowScript().Hash()
	variants := []benchkit.Variant{
		{Name: "raw", Decide: func(ctx context.Context, subject string) error {
			// one limit of rate 1, a cost of 1: the reply is one integer,
			// reset_ms * 3 + the count after INCRBY (2: denied)
			v, err := e.rdb.EvalSha(ctx, sha, []string{"deny:{" + subject + "}:3600000ms"}, 1, 3600000).Int64()
			if err == nil && v%3 != 2 {
				err = fmt.Errorf("raw EVALSHA admitted %s: %v", subject, v)
			}
			return err
		}},
		{Name: "cached", Decide: func(ctx context.Context, subject string) error {
			r, err := lim.Allow(ctx, subject, l)
			if err == nil && (r.Allowed || !r.Cached) {
				err = fmt.Errorf("%s: %+v, want a cached denial", subject, r)
			}
			return err
		}},
	}
	for range b.N {
		tallies, ratios, err := e.Compare(callers, benchkit.RatioRounds, benchkit.RatioWarmUp, benchkit.RatioRoundTime, variants)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(tallies[0].Rate(), "raw-decisions/s")
		b.ReportMetric(tallies[1].Rate(), "cached-decisions/s")
		b.ReportMetric(benchkit.Median(ratios[1]), "cached-x-raw")
	}
}

// BenchmarkServerTime compares FixedWindow and AlignedWindow with the
// minimal hand-written fixed window (INCR, PEXPIRE when new) and
// ulule/limiter's design (INCRBY, then PEXPIRE or PTTL), all through one
// go-redis client on one redis-server:
//
//   - <name>-x-minimal-cN: decisions/s over the minimal script's at N
//     callers, in interleaved rounds (the two scripts as raw EVALSHAs,
//     FixedWindow and AlignedWindow through a Limiter);
//   - server-us-<case>: the server's time per decision (INFO commandstats
//     usec_per_call of EVALSHA after a CONFIG RESETSTAT, each case alone
//     for 400 ms at 16 callers, in 6 interleaved rounds: the median), for
//     AlignedWindow admitted, and for FixedWindow admitted and denied,
//     with one limit and two; server-<case>-x-minimal and -x-ulule: the
//     median of the rounds' ratios to the minimal script's and to ulule's
//     design's. Every case is a raw EVALSHA through the same client: on a
//     machine whose client and server share the cores, the server's clock
//     also counts the time the client's work takes the CPU from it, so the
//     cases must load the client alike;
//   - rb-server-us-<case>, rb-server-AlignedWindow-x-minimal,
//     rb-server-FixedWindow-x-ulule: the same server time with the load
//     from redis-benchmark (when installed) instead of Go callers: a C
//     client whose own work takes far less CPU from the server, on
//     counters that exist (see redisBenchServerTime).
//
// One measurement takes about a minute and a half; run it with
// -benchtime 1x.
//
//	go test -run '^$' -bench ServerTime -benchtime 1x ./store/goredis/
func BenchmarkServerTime(b *testing.B) {
	ctx := context.Background()
	e := newBenchEnv(b)
	for _, s := range []*store.Script{benchkit.MinimalScript(), benchkit.IncrPTTLScript()} {
		if err := e.rdb.ScriptLoad(ctx, s.Source()).Err(); err != nil {
			b.Fatal(err)
		}
	}
	lim, err := limiter.New(goredis.New(e.rdb), strategy.NewFixedWindow(), limiter.WithPrefix("st-limiter"))
	if err != nil {
		b.Fatal(err)
	}
	window := limiter.PerSecond(e.rate)
	fw := benchkit.Variant{Name: "FixedWindow", Decide: func(ctx context.Context, subject string) error {
		r, err := lim.Allow(ctx, subject, window)
		if err == nil && !r.Allowed {
			err = fmt.Errorf("FixedWindow denied %s", subject)
		}
		return err
	}}
	minimal := benchkit.Variant{Name: "minimal", Decide: func(ctx context.Context, subject string) error {
		return e.rdb.EvalSha(ctx, benchkit.MinimalScript().Hash(), []string{"st-minimal:{" + subject + "}"}, e.windowMs).Err()
	}}
	incrPTTL := benchkit.Variant{Name: "incr-pttl", Decide: func(ctx context.Context, subject string) error {
		vals, err := e.rdb.EvalSha(ctx, benchkit.IncrPTTLScript().Hash(), []string{"st-incr-pttl:{" + subject + "}"}, 1, e.windowMs).Int64Slice()
		if err == nil && len(vals) != 2 {
			err = fmt.Errorf("incr-pttl: %d values", len(vals))
		}
		return err
	}}
	// rawFW is FixedWindow's script as a raw EVALSHA: one key per limit,
	// the arguments {rate_1, window_1, ...} (a cost of 1, written, as the
	// Limiter sends it); want is the reply's length.
	rawFW := func(name string, want int, rateWindows ...int64) benchkit.Variant {
		var args []any
		for _, v := range rateWindows {
			args = append(args, v)
		}
		return benchkit.Variant{Name: name, Decide: func(ctx context.Context, subject string) error {
			keys := make([]string, len(rateWindows)/2)
			for i := range keys {
				keys[i] = fmt.Sprintf("st-%s:{%s}:%d", name, subject, i)
			}
			v, err := e.rdb.EvalSha(ctx, strategy.FixedWindowScript().Hash(), keys, args...).Result()
			if err != nil {
				return err
			}
			// one limit: one integer; two: {count, reset_ms} each
			if vals, ok := v.([]any); !ok && want == 2 {
				if _, ok := v.(int64); !ok {
					err = fmt.Errorf("%s: reply %v, want an integer", name, v)
				}
			} else if len(vals) != want {
				err = fmt.Errorf("%s: reply %v, want %d values", name, v, want)
			}
			return err
		}}
	}
	aligned, err := limiter.New(goredis.New(e.rdb), strategy.NewAlignedWindow(), limiter.WithPrefix("st-aligned"))
	if err != nil {
		b.Fatal(err)
	}
	aw := benchkit.AlignedWindow(aligned, window)
	// rawAligned is AlignedWindow's script as a raw EVALSHA, its window
	// named from the app clock (the limiter adds its offset to the
	// server's; here both are one machine's clock). A call that reaches
	// the server after the window it names has ended is counted nowhere
	// and answered {-1, seconds, microseconds}: it is sent again for the
	// server's window, as the strategy does.
	rawAligned := benchkit.Variant{Name: "AlignedWindow", Decide: func(ctx context.Context, subject string) error {
		ms := time.Now().UnixMilli()
		for range 3 {
			key := "st-rawaligned:{" + subject + "}:" + strconv.FormatInt(e.windowMs, 10) + ":" + strconv.FormatInt(ms/e.windowMs, 10)
			v, err := e.rdb.EvalSha(ctx, strategy.AlignedWindowScript().Hash(), []string{key}, e.rate).Result()
			if err != nil {
				return err
			}
			if n, ok := v.(int64); ok && n >= 1 {
				return nil
			}
			vals, ok := v.([]any)
			if !ok || len(vals) != 3 {
				return fmt.Errorf("AlignedWindow: reply %v", v)
			}
			if vals[0] != int64(-1) {
				return nil // a counter created: {count, seconds, microseconds}
			}
			// TIME's fields, as the script read them (strings)
			sec, err1 := store.Int64(vals[1])
			usec, err2 := store.Int64(vals[2])
			if err1 != nil || err2 != nil {
				return fmt.Errorf("AlignedWindow: reply %v", v)
			}
			ms = sec*1000 + usec/1000
		}
		return fmt.Errorf("AlignedWindow: 3 calls named a window the server's clock was not in")
	}}
	if err := e.rdb.ScriptLoad(ctx, strategy.AlignedWindowScript().Source()).Err(); err != nil {
		b.Fatal(err)
	}
	const day = 86_400_000
	compared := []benchkit.Variant{minimal, incrPTTL, fw, aw}
	alone := []benchkit.Variant{
		minimal, incrPTTL, rawAligned,
		rawFW("FixedWindow", 2, e.rate, e.windowMs),
		rawFW("FixedWindow-denied", 2, 1, day),
		rawFW("FixedWindow-2limits", 4, e.rate, e.windowMs, e.rate, 60*e.windowMs),
		rawFW("FixedWindow-2limits-denied", 4, e.rate, e.windowMs, 1, day),
	}
	// Fill the denied cases' counters first.
	for _, v := range alone[4:] {
		for w := range e.MaxCallers() {
			for _, s := range e.Subjects[w] {
				if err := v.Decide(ctx, s); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	for range b.N {
		for _, c := range e.Callers {
			tallies, ratios, err := e.Compare(c, benchkit.RatioRounds, benchkit.RatioWarmUp, benchkit.RatioRoundTime, compared)
			if err != nil {
				b.Fatal(err)
			}
			for i, v := range compared {
				b.ReportMetric(tallies[i].Rate(), fmt.Sprintf("%s-decisions/s-c%d", v.Name, c))
				if i > 0 {
					b.ReportMetric(benchkit.Median(ratios[i]), fmt.Sprintf("%s-x-minimal-c%d", v.Name, c))
				}
			}
		}
		// Interleaved rounds, the order rotating, so that the machine's
		// drift falls on every case alike; the median of each case, and
		// of each round's ratio to the minimal script and to ulule's.
		const rounds = 6
		us := make([][]float64, len(alone))
		for r := range rounds {
			for j := range alone {
				i := (j + r) % len(alone)
				if err := e.rdb.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				if _, _, err := e.Timed(16, 400*time.Millisecond, alone[i].Decide); err != nil {
					b.Fatal(err)
				}
				u, err := evalshaMicros(ctx, e.rdb)
				if err != nil {
					b.Fatal(err)
				}
				us[i] = append(us[i], u)
			}
		}
		for i, v := range alone {
			b.ReportMetric(benchkit.Median(us[i]), "server-us-"+v.Name)
			if i < 2 {
				continue
			}
			xMin, xUlule := make([]float64, rounds), make([]float64, rounds)
			for r := range rounds {
				xMin[r], xUlule[r] = us[i][r]/us[0][r], us[i][r]/us[1][r]
			}
			b.ReportMetric(benchkit.Median(xMin), "server-"+v.Name+"-x-minimal")
			b.ReportMetric(benchkit.Median(xUlule), "server-"+v.Name+"-x-ulule")
		}
		if err := redisBenchServerTime(b, ctx, e); err != nil {
			b.Fatal(err)
		}
	}
}

// redisBenchServerTime reports the server's time per decision of the
// minimal script, ulule's design, AlignedWindow and FixedWindow (one
// limit, a cost of 1, admitted) under redis-benchmark: 16 connections, 64
// subjects (so every counter exists after its first call), windows of a
// day (so that none ends during the run) and a rate of a million per
// window (a generous real limit, which no run reaches: the rate is an
// argument the scripts convert, at a cost that grows with its digits, and
// FixedWindow's one-integer reply, reset_ms·(2·rate+1) + count, needs
// rate × window below 2^51), 6 rounds of 100 000 calls per case in an
// order that rotates, each after a CONFIG RESETSTAT. Without
// redis-benchmark it reports nothing.
func redisBenchServerTime(b *testing.B, ctx context.Context, e *benchEnv) error {
	if _, err := exec.LookPath("redis-benchmark"); err != nil {
		b.Logf("no redis-benchmark, no rb- metrics: %v", err)
		return nil
	}
	const day = 86_400_000
	now, err := e.rdb.Time(ctx).Result()
	if err != nil {
		return err
	}
	rate, period := "1000000", strconv.FormatInt(day, 10)
	cases := []struct {
		name string
		cmd  []string
	}{
		{"minimal", []string{"EVALSHA", benchkit.MinimalScript().Hash(), "1", "rb-minimal:{__rand_int__}", period}},
		{"incr-pttl", []string{"EVALSHA", benchkit.IncrPTTLScript().Hash(), "1", "rb-incr-pttl:{__rand_int__}", "1", period}},
		{"AlignedWindow", []string{"EVALSHA", strategy.AlignedWindowScript().Hash(), "1",
			"rb-aligned:{__rand_int__}:" + period + ":" + strconv.FormatInt(now.UnixMilli()/day, 10), rate}},
		{"FixedWindow", []string{"EVALSHA", strategy.FixedWindowScript().Hash(), "1", "rb-fixed:{__rand_int__}", rate, period}},
	}
	// Each case once by hand first: a call that fails (a script not
	// loaded, a window the server's clock is not in) would be timed as a
	// fast error.
	for _, c := range cases {
		args := make([]any, len(c.cmd))
		for i, a := range c.cmd {
			args[i] = strings.ReplaceAll(a, "__rand_int__", "check")
		}
		v, err := e.rdb.Do(ctx, args...).Result()
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		if vals, ok := v.([]any); ok && len(vals) > 0 && vals[0] == int64(-1) {
			return fmt.Errorf("%s: reply %v", c.name, v)
		}
	}
	const rounds = 6
	us := make([][]float64, len(cases))
	for r := range rounds {
		for j := range cases {
			i := (j + r) % len(cases)
			if err := e.rdb.ConfigResetStat(ctx).Err(); err != nil {
				return err
			}
			if _, err := benchkit.RedisBenchmarkKeys(e.rdb.Options().Addr, 16, 1, 100_000, 64, cases[i].cmd...); err != nil {
				return err
			}
			u, err := evalshaMicros(ctx, e.rdb)
			if err != nil {
				return err
			}
			us[i] = append(us[i], u)
		}
	}
	for i, c := range cases {
		b.ReportMetric(benchkit.Median(us[i]), "rb-server-us-"+c.name)
	}
	b.ReportMetric(benchkit.Median(benchkit.RoundRatios(us[2], us[0])), "rb-server-AlignedWindow-x-minimal")
	b.ReportMetric(benchkit.Median(benchkit.RoundRatios(us[3], us[1])), "rb-server-FixedWindow-x-ulule")
	return nil
}

// BenchmarkAllowMany compares Limiter.AllowMany, 16 decisions per call
// (FixedWindow, every one admitted, 16 subjects per call), with one
// decision per call (Allow), both through the go-redis adapter at 16
// callers in interleaved rounds: many-x-allow is the ratio of their
// decisions per second, the Allow calls sharing pipelines as goredis.New
// makes them do; many-x-allow-unshared the ratio to Allow with each call
// a round trip of its own (goredis.WithSharedPipelines(0)). AllowMany
// sends its 16 decisions in one call of FixedWindow's many-request script;
// many-x-pipelined is its ratio to AllowMany through a store that may not
// (goredis.WithShardingProxy: one EVALSHA per decision, in one pipeline);
// many-aligned-x-many the ratio of AlignedWindow's AllowMany to
// FixedWindow's. redis-benchmark's pipelined EVALSHA of the same script
// (-c 16 -P 16) on the same server is reported beside them.
//
//	go test -run '^$' -bench AllowMany -benchtime 1x ./store/goredis/
func BenchmarkAllowMany(b *testing.B) {
	const callers, perCall = 16, 16
	e := newBenchEnv(b)
	l := e.limit()
	many := benchkit.Variant{Name: "many", Decide: benchkit.Many(e.lim, benchkit.ManyAsks(callers, perCall, l))}
	one := benchkit.Variant{Name: "allow", Decide: e.allow}
	lim, err := limiter.New(goredis.New(e.rdb, goredis.WithSharedPipelines(0)), strategy.NewFixedWindow())
	if err != nil {
		b.Fatal(err)
	}
	unshared := &benchEnv{Kit: e.Kit, rdb: e.rdb, lim: lim, prefix: e.prefix, rate: e.rate, windowMs: e.windowMs}
	oneUnshared := benchkit.Variant{Name: "allow-unshared", Decide: unshared.allow}
	proxied, err := limiter.New(goredis.New(e.rdb, goredis.WithShardingProxy()), strategy.NewFixedWindow())
	if err != nil {
		b.Fatal(err)
	}
	pipelined := benchkit.Variant{Name: "many-pipelined", Decide: benchkit.Many(proxied, benchkit.ManyAsks(callers, perCall, l))}
	aligned, err := limiter.New(goredis.New(e.rdb), strategy.NewAlignedWindow(), limiter.WithPrefix("many-aligned"))
	if err != nil {
		b.Fatal(err)
	}
	manyAligned := benchkit.Variant{Name: "many-aligned", Decide: benchkit.Many(aligned, benchkit.ManyAsks(callers, perCall, l))}
	for range b.N {
		tallies, _, err := e.Compare(callers, benchkit.RatioRounds, benchkit.RatioWarmUp, benchkit.RatioRoundTime, []benchkit.Variant{one, many, oneUnshared, pipelined, manyAligned})
		if err != nil {
			b.Fatal(err)
		}
		single, batched, alone, piped := tallies[0].Rate(), tallies[1].Rate()*perCall, tallies[2].Rate(), tallies[3].Rate()*perCall
		b.ReportMetric(tallies[4].Rate()*perCall, "many-aligned-decisions/s")
		b.ReportMetric(tallies[4].Rate()*perCall/batched, "many-aligned-x-many")
		b.ReportMetric(single, "allow-decisions/s")
		b.ReportMetric(alone, "allow-unshared-decisions/s")
		b.ReportMetric(batched, "many-decisions/s")
		b.ReportMetric(piped, "many-pipelined-decisions/s")
		b.ReportMetric(batched/single, "many-x-allow")
		b.ReportMetric(batched/alone, "many-x-allow-unshared")
		b.ReportMetric(batched/piped, "many-x-pipelined")
		rps, err := benchkit.RedisBenchmark(e.rdb.Options().Addr, callers, perCall, 200000,
			"EVALSHA", strategy.FixedWindowScript().Hash(), "1", "limiter:{rb:__rand_int__}:1000ms", strconv.FormatInt(e.rate, 10), "1000")
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(rps, "redis-benchmark-P16/s")
	}
}

// BenchmarkQuotaLease compares deciding one hot subject that is admitted
// (FixedWindow, a limit no run reaches) with quota leases of 100 units
// (limiter.WithQuotaLease) and without, through go-redis at 64 callers in
// interleaved rounds: lease-x-fixedwindow is the ratio of their decisions
// per second, the calls without leases sharing pipelines as goredis.New
// makes them do; lease-x-fixedwindow-unshared the ratio to FixedWindow
// with each call a round trip of its own (goredis.WithSharedPipelines(0)).
//
//	go test -run '^$' -bench QuotaLease -benchtime 1x ./store/goredis/
func BenchmarkQuotaLease(b *testing.B) {
	const callers = 64
	e := newBenchEnv(b)
	leased, err := limiter.New(goredis.New(e.rdb), strategy.NewFixedWindow(), limiter.WithQuotaLease(100), limiter.WithPrefix("lease"))
	if err != nil {
		b.Fatal(err)
	}
	l := e.limit()
	hot := func(lim *limiter.Limiter) benchkit.Decide {
		return func(ctx context.Context, _ string) error {
			r, err := lim.Allow(ctx, "hot", l)
			if err == nil && !r.Allowed {
				err = errors.New("denied")
			}
			return err
		}
	}
	unshared, err := limiter.New(goredis.New(e.rdb, goredis.WithSharedPipelines(0)), strategy.NewFixedWindow())
	if err != nil {
		b.Fatal(err)
	}
	variants := []benchkit.Variant{{Name: "fixedwindow", Decide: hot(e.lim)}, {Name: "lease", Decide: hot(leased)}, {Name: "fixedwindow-unshared", Decide: hot(unshared)}}
	for range b.N {
		tallies, ratios, err := e.Compare(callers, benchkit.RatioRounds, benchkit.RatioWarmUp, benchkit.RatioRoundTime, variants)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(tallies[0].Rate(), "fixedwindow-decisions/s")
		b.ReportMetric(tallies[1].Rate(), "lease-decisions/s")
		b.ReportMetric(tallies[2].Rate(), "fixedwindow-unshared-decisions/s")
		b.ReportMetric(benchkit.Median(ratios[1]), "lease-x-fixedwindow")
		x := benchkit.RoundRatios(ratios[1], ratios[2])
		b.ReportMetric(benchkit.Median(x), "lease-x-fixedwindow-unshared")
	}
}

// BenchmarkClusterSharing compares FixedWindow through a Limiter on a
// three-master Cluster (one *redis.ClusterClient), the calls sharing
// pipelines per master (the default) and each a round trip of its own
// (WithSharedPipelines(0)), in interleaved rounds at 16 and 64 callers:
// shared-x-unshared-cN is the median of the rounds' ratios of their
// decisions/s. All masters run on this machine, so they take CPU from the
// client as one server does.
//
//	go test -run '^$' -bench ClusterSharing -benchtime 1x ./store/goredis/
func BenchmarkClusterSharing(b *testing.B) {
	c := redistest.StartCluster(b)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), PoolSize: benchPoolSize, MaxRetries: -1})
	b.Cleanup(func() { _ = rdb.Close() })
	k := benchkit.New(b, []int{16, 64}, nil)
	l := limiter.PerSecond(benchRate)
	variant := func(name string, opts ...goredis.Option) benchkit.Variant {
		lim, err := limiter.New(goredis.New(rdb, opts...), strategy.NewFixedWindow(), limiter.WithPrefix("cluster-"+name))
		if err != nil {
			b.Fatal(err)
		}
		return benchkit.Admitted(name, lim, l)
	}
	k.RunSharing(b, variant("unshared", goredis.WithSharedPipelines(0)), variant("shared"))
}
