package goredis_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// The FixedWindow benchmarks compare a Limiter (FixedWindow through the
// go-redis adapter) with what a user writes by hand: an EVALSHA of the same
// script through the same client, on the same keys, against a real
// redis-server started for the run.
//
//	go test -run '^$' -bench FixedWindow -benchtime 2s ./store/goredis/

const (
	// benchPoolSize holds the 64 callers of the widest level.
	benchPoolSize = 64
	// benchSubjectsPerCaller spreads each caller over a few keys, so that
	// no level runs on one hot key.
	benchSubjectsPerCaller = 4
	// benchRawSuffix is the rule part of benchLimit's key, written out as a
	// hand-written caller would; newBenchEnv checks it against limiter.Key.
	benchRawSuffix = "}:1000ms"

	// BenchmarkFixedWindowRatio: ratioRounds rounds per level, each running
	// both variants for ratioRoundTime, the first of them alternating.
	ratioRounds    = 6
	ratioRoundTime = 250 * time.Millisecond
	ratioWarmUp    = 50 * time.Millisecond
	// ratioAllocCalls is the number of sequential calls behind the
	// allocation figures.
	ratioAllocCalls = 5000
)

// benchCallers are the concurrency levels: exactly this many goroutines call
// at once.
var benchCallers = []int{1, 16, 64}

// benchRate is never reached, so every call is admitted and both variants
// do the same work on the server (GET, PTTL, INCRBY; a SET once a second).
const benchRate = 1 << 40

// decideFunc makes one decision for subject and fails unless it is admitted.
type decideFunc func(ctx context.Context, subject string) error

type benchVariant struct {
	name string
	f    decideFunc
}

type benchEnv struct {
	rdb *redis.Client
	lim *limiter.Limiter
	// prefix, rate and windowMs are run-time values, as a hand-written
	// caller has them from its configuration.
	prefix   string
	rate     int64
	windowMs int64
	// subjects[w] are the subjects of caller w, the same for both variants.
	subjects [][]string
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
	e.subjects = make([][]string, benchCallers[len(benchCallers)-1])
	for w := range e.subjects {
		for j := range benchSubjectsPerCaller {
			s := fmt.Sprintf("user-%02d-%d", w, j)
			want, err := limiter.Key(e.prefix, s, l)
			if err != nil {
				b.Fatal(err)
			}
			if got := e.prefix + ":{" + s + benchRawSuffix; got != want {
				b.Fatalf("raw key %q, the limiter uses %q", got, want)
			}
			e.subjects[w] = append(e.subjects[w], s)
		}
	}

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
// FixedWindow script, the reply read as []any of int64.
func (e *benchEnv) raw(ctx context.Context, subject string) error {
	key := e.prefix + ":{" + subject + benchRawSuffix
	vals, err := e.rdb.EvalSha(ctx, strategy.FixedWindowScript().Hash(), []string{key}, "1", "0", e.rate, e.windowMs).Slice()
	if err != nil {
		return fmt.Errorf("raw: %w", err)
	}
	if len(vals) != 4 {
		return fmt.Errorf("raw: %d values in the reply, want 4", len(vals))
	}
	var nums [4]int64
	for i, v := range vals {
		n, ok := v.(int64)
		if !ok {
			return fmt.Errorf("raw: reply value %d is a %T", i, v)
		}
		nums[i] = n
	}
	if nums[0] != 1 {
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

func (e *benchEnv) variants() []benchVariant {
	return []benchVariant{{"raw", e.raw}, {"limiter", e.allow}}
}

// fanOut runs exactly callers goroutines; caller w calls f on its subjects
// in turn for as long as more reports true. It returns the number of calls
// made and the first error, which stops every caller.
func (e *benchEnv) fanOut(callers int, more func() bool, f decideFunc) (int64, error) {
	ctx := context.Background()
	var (
		wg       sync.WaitGroup
		total    atomic.Int64
		failed   atomic.Bool
		errOnce  sync.Once
		firstErr error
	)
	for w := range callers {
		subjects := e.subjects[w]
		wg.Go(func() {
			var n int64
			for i := 0; !failed.Load() && more(); i++ {
				if err := f(ctx, subjects[i%len(subjects)]); err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("caller %d: %w", w, err) })
					failed.Store(true)
					break
				}
				n++
			}
			total.Add(n)
		})
	}
	wg.Wait()
	return total.Load(), firstErr
}

// timed runs f with callers goroutines for about d and returns the calls
// made and the time they took.
func (e *benchEnv) timed(callers int, d time.Duration, f decideFunc) (int64, time.Duration, error) {
	var stop atomic.Bool
	start := time.Now()
	t := time.AfterFunc(d, func() { stop.Store(true) })
	defer t.Stop()
	n, err := e.fanOut(callers, func() bool { return !stop.Load() }, f)
	return n, time.Since(start), err
}

// BenchmarkFixedWindow measures one decision (cost 1, one limit) by 1, 16
// and 64 concurrent callers, by hand (raw) and through the Limiter.
func BenchmarkFixedWindow(b *testing.B) {
	e := newBenchEnv(b)
	for _, c := range benchCallers {
		b.Run(fmt.Sprintf("c%d", c), func(b *testing.B) {
			for _, v := range e.variants() {
				b.Run(v.name, func(b *testing.B) {
					b.ReportAllocs()
					var left atomic.Int64
					left.Store(int64(b.N))
					more := func() bool { return left.Add(-1) >= 0 }
					b.ResetTimer()
					_, err := e.fanOut(c, more, v.f)
					b.StopTimer()
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
				})
			}
		})
	}
}

// BenchmarkFixedWindowRatio compares the two variants within one invocation:
// for each level it runs them in ratioRounds rounds of ratioRoundTime each,
// alternating which goes first to cancel drift, and reports
//
//   - ratio-cN: limiter decisions/s over raw decisions/s with N callers,
//     from the pooled counts and times of all rounds;
//   - extra-allocs-c1, extra-B-c1: the limiter's allocations (and bytes) per
//     decision minus raw's, from ratioAllocCalls sequential calls each;
//   - allocs/op and B/op: the limiter's per decision, from the same
//     sequential calls (the framework's own figure would be per whole
//     measurement); ns/op is suppressed for the same reason.
//
// One measurement takes about 10 s; a -benchtime above that repeats it and
// pools the rounds. Skipped with -short.
func BenchmarkFixedWindowRatio(b *testing.B) {
	if testing.Short() {
		b.Skip("takes about 10 s")
	}
	b.ReportAllocs()
	e := newBenchEnv(b)
	vs := e.variants()
	type tally struct {
		n int64
		d time.Duration
	}
	sums := make([][2]tally, len(benchCallers))
	rounds := make([][]float64, len(benchCallers))
	var allocs, bytes [2]float64
	measurements := 0

	for b.Loop() {
		measurements++
		for li, c := range benchCallers {
			for _, v := range vs { // goroutine stacks, server caches
				if _, _, err := e.timed(c, ratioWarmUp, v.f); err != nil {
					b.Fatal(err)
				}
			}
			for r := range ratioRounds {
				order := [2]int{0, 1}
				if r%2 == 1 {
					order = [2]int{1, 0}
				}
				var tp [2]float64
				for _, vi := range order {
					n, d, err := e.timed(c, ratioRoundTime, vs[vi].f)
					if err != nil {
						b.Fatal(err)
					}
					sums[li][vi].n += n
					sums[li][vi].d += d
					tp[vi] = float64(n) / d.Seconds()
				}
				rounds[li] = append(rounds[li], tp[1]/tp[0])
			}
		}
		for vi, v := range vs {
			a, by, err := e.seqAllocs(v.f)
			if err != nil {
				b.Fatal(err)
			}
			allocs[vi] += a
			bytes[vi] += by
		}
	}

	for li, c := range benchCallers {
		raw := float64(sums[li][0].n) / sums[li][0].d.Seconds()
		lim := float64(sums[li][1].n) / sums[li][1].d.Seconds()
		b.ReportMetric(lim/raw, fmt.Sprintf("ratio-c%d", c))
		b.Logf("c%d: raw %.0f decisions/s, limiter %.0f decisions/s, ratio %.3f; per round %s",
			c, raw, lim, lim/raw, fmtRatios(rounds[li]))
	}
	m := float64(measurements)
	b.ReportMetric((allocs[1]-allocs[0])/m, "extra-allocs-c1")
	b.ReportMetric((bytes[1]-bytes[0])/m, "extra-B-c1")
	// The framework truncates these two to integers: round instead.
	b.ReportMetric(math.Round(allocs[1]/m), "allocs/op")
	b.ReportMetric(math.Round(bytes[1]/m), "B/op")
	b.ReportMetric(0, "ns/op")
	b.Logf("sequential, per decision: raw %.2f allocs %.0f B, limiter %.2f allocs %.0f B",
		allocs[0]/m, bytes[0]/m, allocs[1]/m, bytes[1]/m)
}

// seqAllocs returns the heap allocations and bytes per call of
// ratioAllocCalls sequential calls of f by one caller.
func (e *benchEnv) seqAllocs(f decideFunc) (allocs, bytes float64, err error) {
	ctx := context.Background()
	subjects := e.subjects[0]
	for i := range 100 {
		if err := f(ctx, subjects[i%len(subjects)]); err != nil {
			return 0, 0, err
		}
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range ratioAllocCalls {
		if err := f(ctx, subjects[i%len(subjects)]); err != nil {
			return 0, 0, err
		}
	}
	runtime.ReadMemStats(&after)
	n := float64(ratioAllocCalls)
	return float64(after.Mallocs-before.Mallocs) / n, float64(after.TotalAlloc-before.TotalAlloc) / n, nil
}

func fmtRatios(rs []float64) string {
	s := ""
	for i, r := range rs {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%.3f", r)
	}
	return s
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
					for _, s := range e.subjects[w] {
						if _, err := lim.Allow(context.Background(), s, l); err != nil {
							b.Fatal(err)
						}
					}
				}
				st.trips.Store(0)
				var left atomic.Int64
				left.Store(int64(b.N))
				more := func() bool { return left.Add(-1) >= 0 }
				b.ResetTimer()
				_, err = e.fanOut(callers, more, f)
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
