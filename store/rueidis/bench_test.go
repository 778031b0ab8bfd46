package rueidis_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	rueidisstore "github.com/quotagate/limiter/store/rueidis"
	"github.com/quotagate/limiter/strategy"
)

// The FixedWindow benchmarks compare a Limiter (FixedWindow through the
// rueidis adapter) with what a user writes by hand: an EVALSHA of the same
// script through the same rueidis client, on the same keys, against a real
// redis-server started for the run. The ratio benchmark also measures a
// hand-written EVALSHA through go-redis, to compare the clients.
//
//	go test -run '^$' -bench FixedWindow -benchtime 2s ./store/rueidis/

const (
	// goredisPoolSize holds the 64 callers of the widest level.
	goredisPoolSize = 64
	// benchSubjectsPerCaller spreads each caller over a few keys, so that
	// no level runs on one hot key.
	benchSubjectsPerCaller = 4
	// benchRawSuffix is the rule part of benchLimit's key, written out as a
	// hand-written caller would; newBenchEnv checks it against limiter.Key.
	benchRawSuffix = "}:1000ms"

	// BenchmarkFixedWindowRatio: ratioRounds rounds per level, each running
	// every variant for ratioRoundTime, in an order that rotates.
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

// benchRate is never reached, so every call is admitted and all variants
// do the same work on the server (GET, PTTL, INCRBY; a SET once a second).
const benchRate = 1 << 40

// decideFunc makes one decision for subject and fails unless it is admitted.
type decideFunc func(ctx context.Context, subject string) error

type benchVariant struct {
	name string
	f    decideFunc
}

type benchEnv struct {
	c   rueidis.Client
	rdb *redis.Client
	lim *limiter.Limiter
	sha string
	// prefix, rate and windowMs are run-time values, as a hand-written
	// caller has them from its configuration.
	prefix   string
	rate     int64
	windowMs int64
	// subjects[w] are the subjects of caller w, the same for all variants.
	subjects [][]string
}

// newBenchEnv starts a redis-server, loads the script, builds one rueidis
// client with the documented options (shared by the raw and limiter
// variants), a go-redis client, and the Limiter, and checks that all
// variants count on the same key.
func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	ctx := context.Background()
	srv := redistest.StartServer(b)
	c, err := rueidis.NewClient(options(srv.Addr()))
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
	if _, err := e.fanOut(benchCallers[len(benchCallers)-1], counted(1000), e.raw); err != nil {
		b.Fatal(err)
	}
	return e
}

// counted returns a more func that allows n calls in all.
func counted(n int64) func() bool {
	var left atomic.Int64
	left.Store(n)
	return func() bool { return left.Add(-1) >= 0 }
}

func (e *benchEnv) limit() limiter.Limit { return limiter.PerSecond(e.rate) }

// raw is the hand-written call through rueidis: the key built per call,
// EVALSHA of the FixedWindow script, the reply read as integers.
func (e *benchEnv) raw(ctx context.Context, subject string) error {
	key := e.prefix + ":{" + subject + benchRawSuffix
	cmd := e.c.B().Evalsha().Sha1(e.sha).Numkeys(1).Key(key).
		Arg("1", "0", strconv.FormatInt(e.rate, 10), strconv.FormatInt(e.windowMs, 10)).Build()
	nums, err := e.c.Do(ctx, cmd).AsIntSlice()
	if err != nil {
		return fmt.Errorf("raw: %w", err)
	}
	if len(nums) != 4 {
		return fmt.Errorf("raw: %d values in the reply, want 4", len(nums))
	}
	if nums[0] != 1 {
		return errors.New("raw: denied")
	}
	return nil
}

// goredisRaw is the same hand-written call through go-redis.
func (e *benchEnv) goredisRaw(ctx context.Context, subject string) error {
	key := e.prefix + ":{" + subject + benchRawSuffix
	vals, err := e.rdb.EvalSha(ctx, e.sha, []string{key}, "1", "0", e.rate, e.windowMs).Slice()
	if err != nil {
		return fmt.Errorf("go-redis raw: %w", err)
	}
	if len(vals) != 4 {
		return fmt.Errorf("go-redis raw: %d values in the reply, want 4", len(vals))
	}
	if n, ok := vals[0].(int64); !ok || n != 1 {
		return fmt.Errorf("go-redis raw: denied (%v)", vals[0])
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
					more := counted(int64(b.N))
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

// BenchmarkFixedWindowRatio compares the variants within one invocation:
// for each level it runs them in ratioRounds rounds of ratioRoundTime each,
// rotating which goes first to cancel drift, and reports
//
//   - ratio-cN: limiter decisions/s over raw rueidis decisions/s with N
//     callers, from the pooled counts and times of all rounds;
//   - vs-goredis-raw-c64: limiter (on rueidis) decisions/s over a
//     hand-written go-redis EVALSHA's (PoolSize 64) with 64 callers, run in
//     the same rounds;
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
	const (
		rawV = iota
		limV
		goredisV
	)
	vs := append(e.variants(), benchVariant{"goredis-raw", e.goredisRaw})
	type tally struct {
		n int64
		d time.Duration
	}
	sums := make([][3]tally, len(benchCallers))
	rounds := make([][]float64, len(benchCallers))
	var allocs, bytes [2]float64
	measurements := 0

	for b.Loop() {
		measurements++
		for li, c := range benchCallers {
			nv := 2
			if c == 64 {
				nv = 3 // go-redis only where the comparison is reported
			}
			for _, v := range vs[:nv] { // goroutine stacks, server caches
				if _, _, err := e.timed(c, ratioWarmUp, v.f); err != nil {
					b.Fatal(err)
				}
			}
			for r := range ratioRounds {
				var tp [3]float64
				for k := range nv {
					vi := (r + k) % nv
					n, d, err := e.timed(c, ratioRoundTime, vs[vi].f)
					if err != nil {
						b.Fatal(err)
					}
					sums[li][vi].n += n
					sums[li][vi].d += d
					tp[vi] = float64(n) / d.Seconds()
				}
				rounds[li] = append(rounds[li], tp[limV]/tp[rawV])
			}
		}
		for vi, v := range vs[:2] {
			a, by, err := e.seqAllocs(v.f)
			if err != nil {
				b.Fatal(err)
			}
			allocs[vi] += a
			bytes[vi] += by
		}
	}

	rate := func(t tally) float64 { return float64(t.n) / t.d.Seconds() }
	for li, c := range benchCallers {
		raw, lim := rate(sums[li][rawV]), rate(sums[li][limV])
		b.ReportMetric(lim/raw, fmt.Sprintf("ratio-c%d", c))
		b.Logf("c%d: raw %.0f decisions/s, limiter %.0f decisions/s, ratio %.3f; per round %s",
			c, raw, lim, lim/raw, fmtRatios(rounds[li]))
		if c == 64 {
			gr := rate(sums[li][goredisV])
			b.ReportMetric(lim/gr, "vs-goredis-raw-c64")
			b.Logf("c64: go-redis raw %.0f decisions/s; rueidis limiter / go-redis raw %.3f", gr, lim/gr)
		}
	}
	m := float64(measurements)
	b.ReportMetric((allocs[limV]-allocs[rawV])/m, "extra-allocs-c1")
	b.ReportMetric((bytes[limV]-bytes[rawV])/m, "extra-B-c1")
	// The framework truncates these two to integers: round instead.
	b.ReportMetric(math.Round(allocs[limV]/m), "allocs/op")
	b.ReportMetric(math.Round(bytes[limV]/m), "B/op")
	b.ReportMetric(0, "ns/op")
	b.Logf("sequential, per decision: raw %.2f allocs %.0f B, limiter %.2f allocs %.0f B",
		allocs[rawV]/m, bytes[rawV]/m, allocs[limV]/m, bytes[limV]/m)
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
