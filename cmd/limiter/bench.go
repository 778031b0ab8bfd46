package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/benchkit"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/store/redigo"
	rueidisstore "github.com/quotagate/limiter/store/rueidis"
	"github.com/quotagate/limiter/strategy"
)

// maxFlushDelay bounds -rueidis-flush-delay: rueidis suggests tens of
// microseconds, and a longer pause holds every pipelined call as long.
const maxFlushDelay = 10 * time.Millisecond

// benchRate is never reached: every decision is admitted, so the raw call
// and the Limiter do the same work on the server.
const benchRate = 1 << 40

// bench compares, for each adapter, strategy and workload (-adapters,
// -strategies, -workloads), decisions through the Limiter with the
// client's own EVALSHA of the same script on the same keys (what a user
// writes by hand), in interleaved rounds.
func bench(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("redis", "", "Redis URL (default: an embedded miniredis, which measures the client side only)")
	callersFlag := fs.String("callers", "1,16,64", "comma-separated numbers of concurrent callers")
	rounds := fs.Int("rounds", benchkit.RatioRounds, "rounds per level; each runs raw and limiter once")
	round := fs.Duration("round", benchkit.RatioRoundTime, "how long each variant runs in a round")
	allocCalls := fs.Int("allocs", benchkit.RatioAllocCalls, "sequential decisions of each variant behind the allocations per decision")
	names := fs.String("adapters", "goredis,rueidis,redigo", "comma-separated adapters")
	asJSON := fs.Bool("json", false, "print the results as one JSON object (the header goes to stderr)")
	svgFile := fs.String("svg", "", "also write the results as an SVG bar chart to this file")
	strategiesFlag := fs.String("strategies", "fixedwindow", "comma-separated strategies: "+strings.Join(benchStrategyNames(), ", "))
	workloadsFlag := fs.String("workloads", "admit", "comma-separated workloads: admit (every call admitted, 4 subjects per caller), deny (every call denied), hot (every caller on one subject, admitted; not for slidinglog), many (AllowMany of 16 subjects per call against 16 EVALSHAs in one pipeline, admitted)")
	flushDelay := fs.Duration("rueidis-flush-delay", 0, "the rueidis client's MaxFlushDelay (default 0, rueidis's default: each write flushed at once), for both the raw calls and the Limiter's: a delay makes fewer, larger writes, which under many callers per client saves CPU, and with few adds latency")
	var tf tlsFlags
	tf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return 0, err
	}
	if *flushDelay < 0 || *flushDelay > maxFlushDelay {
		return 0, fmt.Errorf("%w: -rueidis-flush-delay %s is outside 0 to %s", errUsage, *flushDelay, maxFlushDelay)
	}
	callers, err := parseCallers(*callersFlag)
	if err != nil {
		return 0, err
	}
	if *rounds < 1 || *round < time.Millisecond || *allocCalls < 1 {
		return 0, fmt.Errorf("%w: -rounds and -allocs must be at least 1 and -round at least 1ms", errUsage)
	}
	ads, err := selectAdapters(*names)
	if err != nil {
		return 0, err
	}
	strats, err := selectBenchStrategies(*strategiesFlag)
	if err != nil {
		return 0, err
	}
	workloads, err := selectWorkloads(*workloadsFlag)
	if err != nil {
		return 0, err
	}
	if *flushDelay > 0 && !slices.ContainsFunc(ads, func(a adapter) bool { return a.name == "rueidis" }) {
		return 0, fmt.Errorf("%w: -rueidis-flush-delay needs the rueidis adapter in -adapters", errUsage)
	}
	// the strategies and workloads measured, in order
	type pair struct {
		sp benchStrategy
		wl string
	}
	var pairs []pair
	var notMeasured []string
	for _, sp := range strats {
		for _, wl := range workloads {
			if wl == "hot" && sp.notHot != "" {
				notMeasured = append(notMeasured, fmt.Sprintf("%s on the hot workload is not measured: %s", sp.name, sp.notHot))
				continue
			}
			pairs = append(pairs, pair{sp, wl})
		}
	}
	if len(pairs) == 0 {
		return 0, fmt.Errorf("%w: nothing to measure: %s", errUsage, strings.Join(notMeasured, "; "))
	}
	if slices.Contains(workloads, "many") {
		for _, sp := range strats {
			if _, ok := sp.s.(limiter.ScriptStrategy); !ok && !sp.aligned {
				return 0, fmt.Errorf("%w: the many workload needs strategies whose decision is one script: not %s", errUsage, sp.name)
			}
		}
	}

	addr, conn := "", connOptions{}
	backend := "embedded miniredis (in this process: the ratios show the client side only, and the allocations include the server's)"
	if *url != "" {
		if addr, conn, err = parseRedisURL(*url); err != nil {
			return 0, err
		}
		if conn.tls, err = tf.config(conn.tls); err != nil {
			return 0, err
		}
		backend = "redis at " + serverName(addr, conn) + " (keys under limiter-bench:, deleted after)"
	} else if tf.set() {
		return 0, fmt.Errorf("%w: the -tls options need -redis rediss://...", errUsage)
	}
	if *flushDelay > 0 {
		conn.rueidisFlushDelay = *flushDelay
		backend += "; rueidis with MaxFlushDelay " + flushDelay.String()
	}

	// The chart is written to a file of its own next to the one named (its
	// target, for a symbolic link), made before the run (a directory that
	// cannot be written fails at once, not after minutes of measuring), and
	// renamed to it only when the run succeeded, with the mode the file
	// had: a failed run leaves an earlier chart as it was. A path that is
	// not a regular file (/dev/stdout) is written once the run succeeded.
	var svg *os.File
	svgPath, svgMode := *svgFile, os.FileMode(0o644)
	if *svgFile != "" {
		if p, err := filepath.EvalSymlinks(svgPath); err == nil {
			svgPath = p
		}
		fi, err := os.Stat(svgPath)
		if err == nil {
			if fi.IsDir() {
				return 0, fmt.Errorf("%w: -svg %s is a directory: name the chart's file", errUsage, *svgFile)
			}
			svgMode = fi.Mode().Perm()
		}
		if err != nil || fi.Mode().IsRegular() {
			if svg, err = os.CreateTemp(filepath.Dir(svgPath), ".limiter-bench-*.svg"); err != nil {
				return 0, err
			}
			defer func() {
				svg.Close()
				_ = os.Remove(svg.Name()) // gone already when renamed
			}()
		}
	}
	if *url == "" {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			return 0, err
		}
		defer m.Close()
		addr = m.Addr()
	}
	out := stdout
	if *asJSON {
		out = stderr
	}
	fmt.Fprintf(out, "limiter bench: one limit per decision, each strategy against its script's raw EVALSHA through the same client; %s\n", backend)
	fmt.Fprintf(out, "%d rounds of %s per level, raw and limiter alternating; latency of the limiter's calls (and the raw calls'); allocations per decision over %d sequential decisions\n", *rounds, *round, *allocCalls)
	if slices.Contains(workloads, "many") {
		fmt.Fprintf(out, "many: each call decides %d subjects (AllowMany; raw: %d EVALSHAs in one pipeline); decisions/s count each, latencies are of whole calls\n", manyPerCall, manyPerCall)
	}
	for _, n := range notMeasured {
		fmt.Fprintln(out, n)
	}
	fmt.Fprintln(out)
	levels := len(pairs) * len(ads) * len(callers)
	fmt.Fprintf(stderr, "measuring %d levels (about %s each)...\n", levels, time.Duration(*rounds)*2*(*round)+max(*round, benchkit.RatioWarmUp)*2)

	// An interrupt (Ctrl-C, SIGTERM) ends the measuring: the level that
	// runs stops, deletes the keys it wrote, and bench exits 1. A second
	// interrupt ends the process at once.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	var results []benchRow
	for _, p := range pairs {
		sp, wl := p.sp, p.wl
		for _, ad := range ads {
			st, closeFn, err := ad.single(conn)(ctx, addr)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", ad.name, err)
			}
			err = benchAdapter(ctx, callers, ad.name, st, sp, wl, *rounds, *round, *allocCalls, func(r benchRow) {
				results = append(results, r)
				fmt.Fprintf(stderr, "[%d/%d] %s %s, %s, %d callers: limiter ÷ raw %.3f\n", len(results), levels, r.Strategy, r.Workload, r.Adapter, r.Callers, r.Ratio)
			})
			closeFn()
			if ctx.Err() != nil {
				return 1, fmt.Errorf("interrupted after %d of %d levels; the keys it wrote were deleted", len(results), levels)
			}
			if err != nil {
				return 0, fmt.Errorf("%s %s, %s: %w", sp.name, wl, ad.name, err)
			}
		}
	}
	fmt.Fprintln(stderr)
	// The results first, so that a chart that cannot be written loses
	// nothing of the run.
	if err := printBench(stdout, *asJSON, backend, *rounds, *round, results); err != nil {
		return 0, err
	}
	switch {
	case svg != nil:
		if _, err := svg.Write(benchSVG(backend, results)); err != nil {
			return 0, err
		}
		if err := svg.Close(); err != nil {
			return 0, err
		}
		if err := os.Chmod(svg.Name(), svgMode); err != nil {
			return 0, err
		}
		if err := os.Rename(svg.Name(), svgPath); err != nil {
			return 0, err
		}
	case *svgFile != "":
		if err := os.WriteFile(svgPath, benchSVG(backend, results), svgMode); err != nil {
			return 0, err
		}
	}
	return 0, nil
}

// printBench prints the results to w: as one JSON object, or as a table.
func printBench(w io.Writer, asJSON bool, backend string, rounds int, round time.Duration, results []benchRow) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Backend string     `json:"backend"`
			Rounds  int        `json:"rounds"`
			RoundMS int64      `json:"round_ms"`
			Results []benchRow `json:"results"`
		}{backend, rounds, round.Milliseconds(), results})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STRATEGY\tWORKLOAD\tADAPTER\tCALLERS\tRAW/S\tLIMITER/S\tLIMITER÷RAW\tROUNDS (MEDIAN, MIN–MAX)\tP50 (RAW)\tP99 (RAW)\tALLOCS (RAW)")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.0f\t%.0f\t%.3f\t%.3f, %.3f–%.3f\t%s (%s)\t%s (%s)\t%.1f (%.1f)\n", r.Strategy, r.Workload, r.Adapter, r.Callers, r.RawPerSec, r.LimiterPerSec, r.Ratio, r.RoundsMedian, r.RoundsMin, r.RoundsMax,
			micros(r.P50Micros), micros(r.RawP50Micros), micros(r.P99Micros), micros(r.RawP99Micros), r.Allocs, r.RawAllocs)
	}
	return tw.Flush()
}

// benchRow is one level's result: decisions per second of the raw EVALSHA
// and of the Limiter, their ratio over the whole level and the ratios of
// its rounds, the Limiter's latency quantiles at this level, and the
// allocations per decision of each, made one after another.
type benchRow struct {
	Strategy      string  `json:"strategy"`
	Workload      string  `json:"workload"`
	Adapter       string  `json:"adapter"`
	Callers       int     `json:"callers"`
	RawPerSec     float64 `json:"raw_per_s"`
	LimiterPerSec float64 `json:"limiter_per_s"`
	Ratio         float64 `json:"ratio"`
	RoundsMedian  float64 `json:"rounds_median"`
	RoundsMin     float64 `json:"rounds_min"`
	RoundsMax     float64 `json:"rounds_max"`
	P50Micros     float64 `json:"p50_us"`
	P99Micros     float64 `json:"p99_us"`
	RawP50Micros  float64 `json:"raw_p50_us"`
	RawP99Micros  float64 `json:"raw_p99_us"`
	// Allocs and RawAllocs are per decision: per call but in the many
	// workload, whose calls make 16 decisions (the names are kept for
	// what reads them).
	Allocs    float64 `json:"allocs_per_call"`
	RawAllocs float64 `json:"raw_allocs_per_call"`
}

// micros formats a latency in µs.
func micros(us float64) string {
	if us >= 1000 {
		return fmt.Sprintf("%.1fms", us/1000)
	}
	return fmt.Sprintf("%.0fµs", us)
}

// benchStrategy is a strategy the bench runs, scripted, so that its raw
// baseline is its own script, and the limit the admit and hot workloads
// use (never reached by a run). A ScriptStrategy's raw call is the script
// of its BatchScript; aligned names the epoch-aligned window's script
// instead (keys named by the window's index, see alignedRaw).
type benchStrategy struct {
	name    string
	s       limiter.Strategy
	limit   limiter.Limit
	aligned bool
	// notHot, when set, says why the strategy is not measured on the hot
	// workload: one subject asks more than its largest limit admits, so
	// the calls would be denials, not the admitted decisions measured.
	notHot string
}

func benchStrategies() []benchStrategy {
	return []benchStrategy{
		{name: "fixedwindow", s: strategy.NewFixedWindow(), limit: limiter.PerSecond(benchRate)},
		{name: "alignedwindow", s: strategy.NewAlignedWindow(), limit: limiter.PerSecond(benchRate), aligned: true},
		{name: "gcra", s: strategy.NewGCRA(), limit: limiter.Limit{Rate: 1_000_000, Burst: 1 << 30, Period: time.Second}},
		{name: "tokenbucket", s: strategy.NewTokenBucket(), limit: limiter.Limit{Rate: 1_000_000, Burst: 1 << 30, Period: time.Second}},
		{name: "slidingwindow", s: strategy.NewSlidingWindow(), limit: limiter.PerSecond(1<<26 - 1)},
		{name: "slidinglog", s: strategy.NewSlidingLog(), limit: limiter.PerSecond(strategy.SlidingLogMaxRate),
			notHot: fmt.Sprintf("a sliding log admits at most %d decisions a second per subject, fewer than one subject of many callers asks", strategy.SlidingLogMaxRate)},
	}
}

func benchStrategyNames() []string {
	var out []string
	for _, s := range benchStrategies() {
		out = append(out, s.name)
	}
	return out
}

func selectBenchStrategies(names string) ([]benchStrategy, error) {
	var out []benchStrategy
	for _, n := range strings.Split(names, ",") {
		n = strings.TrimSpace(n)
		i := slices.IndexFunc(benchStrategies(), func(s benchStrategy) bool { return s.name == n })
		if i < 0 {
			return nil, fmt.Errorf("%w: unknown strategy %q (have: %s)", errUsage, n, strings.Join(benchStrategyNames(), ", "))
		}
		if slices.ContainsFunc(out, func(s benchStrategy) bool { return s.name == n }) {
			continue // (named twice: measured once)
		}
		out = append(out, benchStrategies()[i])
	}
	return out, nil
}

func selectWorkloads(names string) ([]string, error) {
	var out []string
	for _, n := range strings.Split(names, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(benchWorkloads, n) {
			return nil, fmt.Errorf("%w: unknown workload %q (have: %s)", errUsage, n, strings.Join(benchWorkloads, ", "))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// benchWorkloads are the workloads bench knows.
var benchWorkloads = []string{"admit", "deny", "hot", "many"}

// benchAdapter measures one strategy and workload through one adapter at
// every level of callers.
func benchAdapter(ctx context.Context, callers []int, name string, st store.Store, sp benchStrategy, workload string, rounds int, round time.Duration, allocCalls int, done func(benchRow)) error {
	const prefix = "limiter-bench"
	lim, err := limiter.New(st, sp.s, limiter.WithPrefix(prefix))
	if err != nil {
		return err
	}
	kit := benchkit.NewKit(callers)
	kit.Done = ctx.Done() // an interrupt ends the level at its next call
	l := sp.limit
	switch workload {
	case "deny":
		l = limiter.PerDay(1)
	case "hot":
		for w := range kit.Subjects {
			kit.Subjects[w] = []string{"hot"}
		}
	}
	// The raw baseline does what a hand-written caller does per call: its
	// key from the subject by concatenation, its arguments from its
	// configuration, made once.
	keyOf, err := rawKeys(prefix, l, kit)
	if err != nil {
		return err
	}
	lv := level{kit: kit, rounds: rounds, round: round, allocCalls: allocCalls, per: 1,
		row: benchRow{Strategy: sp.name, Workload: workload, Adapter: name}}
	if workload == "many" {
		return benchMany(ctx, lv, st, lim, sp, l, keyOf, done)
	}
	allow := func(ctx context.Context, subject string) error {
		res, err := lim.Allow(ctx, subject, l)
		if err == nil && res.Allowed != (workload != "deny") {
			err = fmt.Errorf("limiter: %s: allowed=%v in the %s workload", subject, res.Allowed, workload)
		}
		return err
	}
	rawDecide, err := rawDecider(st, sp, l, keyOf)
	if err != nil {
		return err
	}

	subjects := []string{"bench-check"}
	for _, ss := range kit.Subjects {
		for _, s := range ss {
			if !slices.Contains(subjects, s) {
				subjects = append(subjects, s)
			}
		}
	}
	defer resetAll(ctx, lim, subjects, l)
	for _, s := range subjects {
		if err := lim.Reset(ctx, s, l); err != nil {
			return err
		}
	}
	// The limiter's first call loads the script (EVAL after NOSCRIPT); for
	// FixedWindow admitted, one call of each on a fresh subject must leave
	// one counter at 2. The deny workload fills every subject first.
	if _, err := lim.Allow(ctx, "bench-check", l); err != nil {
		return err
	}
	if err := rawDecide(ctx, "bench-check"); err != nil {
		return err
	}
	if sp.name == "fixedwindow" && workload != "deny" {
		if res, err := lim.Peek(ctx, "bench-check", l); err != nil || res.Remaining != benchRate-2 {
			return fmt.Errorf("after one call of each, remaining %d (%v), want %d: raw and limiter count apart", res.Remaining, err, int64(benchRate-2))
		}
	}
	if workload == "deny" {
		for _, s := range subjects {
			if _, err := lim.Allow(ctx, s, l); err != nil {
				return err
			}
		}
	}

	return lv.measure(rawDecide, allow, done)
}

// level is what bench measures at each number of callers of one strategy,
// workload and adapter.
type level struct {
	kit        *benchkit.Kit
	rounds     int
	round      time.Duration
	allocCalls int
	// per is the decisions each call makes (the many workload's: several)
	per int
	// row names the strategy, workload and adapter of the results
	row benchRow
}

// resetTimeout bounds each Reset of a benchmark's clean-up.
const resetTimeout = 2 * time.Second

// resetAll deletes the counters of subjects for l once a benchmark ends,
// interrupted (ctx canceled) or not: each Reset on a context that ctx's
// cancellation does not end, bounded by resetTimeout, and none after the
// first that fails (a server that stopped answering would hold every one
// for its client's timeouts and retries: minutes; the keys left expire).
func resetAll(ctx context.Context, lim *limiter.Limiter, subjects []string, l limiter.Limit) {
	ctx = context.WithoutCancel(ctx)
	for _, s := range subjects {
		rctx, cancel := context.WithTimeout(ctx, resetTimeout)
		err := lim.Reset(rctx, s, l)
		cancel()
		if err != nil {
			return
		}
	}
}

// measure compares raw and limiter (each call making lv.per decisions) at
// each of lv's numbers of callers, and reports each level's result to
// done: decisions per second, the latencies of whole calls, allocations
// per decision.
func (lv level) measure(raw, lim benchkit.Decide, done func(benchRow)) error {
	kit, per := lv.kit, float64(lv.per)
	calls := max(lv.allocCalls/lv.per, 1)
	rawAllocs, _, err := kit.SeqAllocs(raw, calls)
	if err != nil || kit.Stopped() {
		return err // (interrupted: no result)
	}
	limAllocs, _, err := kit.SeqAllocs(lim, calls)
	if err != nil || kit.Stopped() {
		return err
	}
	for _, c := range kit.Callers {
		var hRaw, hLim benchkit.Histogram
		tallies, ratios, err := kit.Compare(c, lv.rounds, max(lv.round, benchkit.RatioWarmUp), lv.round,
			[]benchkit.Variant{{Name: "raw", Decide: benchkit.Timing(&hRaw, raw), Warm: raw}, {Name: "limiter", Decide: benchkit.Timing(&hLim, lim), Warm: lim}})
		if err != nil {
			return err
		}
		if kit.Stopped() {
			return nil // interrupted: no result
		}
		rr, lr := tallies[0].Rate()*per, tallies[1].Rate()*per
		rs := ratios[1]
		us := func(h *benchkit.Histogram, q float64) float64 {
			return float64(h.Quantile(q)) / float64(time.Microsecond)
		}
		r := lv.row
		r.Callers, r.RawPerSec, r.LimiterPerSec, r.Ratio = c, rr, lr, lr/rr
		r.RoundsMedian, r.RoundsMin, r.RoundsMax = benchkit.Median(rs), slices.Min(rs), slices.Max(rs)
		r.P50Micros, r.P99Micros, r.RawP50Micros, r.RawP99Micros = us(&hLim, 0.5), us(&hLim, 0.99), us(&hRaw, 0.5), us(&hRaw, 0.99)
		r.Allocs, r.RawAllocs = limAllocs/per, rawAllocs/per
		done(r)
	}
	return nil
}

// rawScript returns the hand-written EVALSHA for the client behind st: the
// arguments as a hand-written caller passes them, the reply read as the
// client returns it (an array, or an integer: FixedWindow's common reply).
// rawDecider returns the raw baseline of strategy sp for limit l: the
// hand-written call of its script on the key keyOf names, with the
// arguments the strategy sends, made once unless they change from call to
// call (a sliding log's nonce: then for every call, as a hand-written
// caller makes one).
func rawDecider(st store.Store, sp benchStrategy, l limiter.Limit, keyOf func(string) string) (benchkit.Decide, error) {
	ss, scripted := sp.s.(limiter.ScriptStrategy)
	switch {
	case sp.aligned:
		prep, err := rawScript(st, strategy.AlignedWindowScript().Hash())
		if err != nil {
			return nil, err
		}
		return alignedRaw(keyOf, l, prep([]any{l.Rate}, nil)), nil
	case !scripted:
		return nil, fmt.Errorf("%s: no raw baseline for a strategy that is not scripted", sp.name)
	default:
		script, args, vary, err := rawArgs(ss, l, keyOf("bench-check"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sp.name, err)
		}
		prep, err := rawScript(st, script.Hash())
		if err != nil {
			return nil, err
		}
		call := prep(args, vary)
		return func(ctx context.Context, subject string) error {
			_, err := call(ctx, []string{keyOf(subject)})
			return err
		}, nil
	}
}

// rawArgs returns the script a scripted strategy runs for one decision of
// l on key, and its arguments as a hand-written caller makes them: once,
// in the client's form, except those that change from call to call (a
// sliding log's nonce, a random integer), whose positions vary lists, to
// be drawn anew for every call, as a hand-written caller draws them. The
// arguments name no key.
func rawArgs(ss limiter.ScriptStrategy, l limiter.Limit, key string) (script *store.Script, args []any, vary []int, err error) {
	req := limiter.Request{Keys: []string{key}, Limits: []limiter.Limit{l}, Cost: 1}
	script, args, err = ss.BatchScript(req)
	if err != nil {
		return nil, nil, nil, err
	}
	_, again, err := ss.BatchScript(req)
	if err != nil {
		return nil, nil, nil, err
	}
	for i := range args {
		if !reflect.DeepEqual(args[i], again[i]) {
			if _, ok := args[i].(int64); !ok {
				return nil, nil, nil, fmt.Errorf("no raw baseline for an argument %T that changes from call to call", args[i])
			}
			vary = append(vary, i)
		}
	}
	return script, args, vary, nil
}

// rawCall is a hand-written EVALSHA of one script with given arguments
// through a client, returning the client's own reply value.
type rawCall func(ctx context.Context, keys []string) (any, error)

// rawScript returns how a hand-written caller calls the script sha through
// st's client: given the arguments, their form for the client, made once,
// and the call, which draws the integer arguments at the positions vary
// anew (rand.Int64) for every call.
func rawScript(st store.Store, sha string) (func(args []any, vary []int) rawCall, error) {
	switch s := st.(type) {
	case *goredis.Store:
		rdb := s.Client()
		return func(args []any, vary []int) rawCall {
			return func(ctx context.Context, keys []string) (any, error) {
				a := args
				if len(vary) > 0 {
					a = append(make([]any, 0, len(args)), args...)
					for _, i := range vary {
						a[i] = rand.Int64()
					}
				}
				v, err := rdb.EvalSha(ctx, sha, keys, a...).Result()
				if err != nil {
					return nil, fmt.Errorf("raw: %w", err)
				}
				return v, nil
			}
		}, nil
	case *rueidisstore.Store:
		c := s.Client()
		return func(args []any, vary []int) rawCall {
			texts := make([]string, len(args))
			for i, a := range args {
				texts[i] = fmt.Sprint(a)
			}
			return func(ctx context.Context, keys []string) (any, error) {
				t := texts
				if len(vary) > 0 {
					var buf [8]string // a hand-written call's argument list
					t = append(buf[:0], texts...)
					for _, i := range vary {
						t[i] = strconv.FormatInt(rand.Int64(), 10)
					}
				}
				cmd := c.B().Evalsha().Sha1(sha).Numkeys(int64(len(keys))).Key(keys...).Arg(t...).Build()
				v, err := c.Do(ctx, cmd).ToAny()
				if err != nil {
					return nil, fmt.Errorf("raw: %w", err)
				}
				return v, nil
			}
		}, nil
	case *redigo.Store:
		p := s.Pool()
		return func(args []any, vary []int) rawCall {
			return func(ctx context.Context, keys []string) (any, error) {
				conn, err := p.GetContext(ctx)
				if err != nil {
					return nil, fmt.Errorf("raw: %w", err)
				}
				a := make([]any, 0, 2+len(keys)+len(args))
				a = append(a, sha, len(keys))
				for _, k := range keys {
					a = append(a, k)
				}
				a = append(a, args...)
				for _, i := range vary {
					a[2+len(keys)+i] = rand.Int64()
				}
				v, err := conn.Do("EVALSHA", a...)
				_ = conn.Close()
				if err != nil {
					return nil, fmt.Errorf("raw: %w", err)
				}
				return v, nil
			}
		}, nil
	}
	return nil, fmt.Errorf("no raw baseline for a %T", st)
}

// rawKeys returns how a hand-written caller names l's key for a subject:
// prefix, ":{", the subject, "}" and the rule, by concatenation. It checks
// that this is limiter.Key's name for every subject of kit.
func rawKeys(prefix string, l limiter.Limit, kit *benchkit.Kit) (func(subject string) string, error) {
	probe, err := limiter.Key(prefix, "s", l)
	if err != nil {
		return nil, err
	}
	head := prefix + ":{"
	rule, ok := strings.CutPrefix(probe, head+"s}")
	if !ok {
		return nil, fmt.Errorf("raw: the limiter names a key %q, not %s<subject>}<rule>", probe, head)
	}
	rule = "}" + rule
	keyOf := func(subject string) string { return head + subject + rule }
	for _, ss := range append(kit.Subjects, []string{"bench-check"}) {
		for _, s := range ss {
			if want, err := limiter.Key(prefix, s, l); err != nil || keyOf(s) != want {
				return nil, fmt.Errorf("raw: key %q for %q, the limiter names %q (%v)", keyOf(s), s, want, err)
			}
		}
	}
	return keyOf, nil
}

// alignedRaw is the hand-written call of AlignedWindow's script: the key
// of limit l for subject (keyOf), followed by its period in milliseconds
// and the index of the epoch-aligned window the app's clock plus its
// offset to the server's is in, with raw's arguments (the rate: a cost of
// 1). A call that reaches
// the server outside that window is counted nowhere and answered {-1,
// seconds, microseconds} of the server's TIME: the offset is taken from it
// and the call sent again.
func alignedRaw(keyOf func(string) string, l limiter.Limit, raw rawCall) benchkit.Decide {
	p := l.Period.Milliseconds()
	var offset atomic.Int64 // ms, server - app
	return func(ctx context.Context, subject string) error {
		base := keyOf(subject) + ":" + strconv.FormatInt(p, 10) + ":"
		ms := time.Now().UnixMilli() + offset.Load()
		for range 3 {
			v, err := raw(ctx, []string{base + strconv.FormatInt(ms/p, 10)})
			if err != nil {
				return err
			}
			var stale bool
			if ms, stale = alignedStale(v, &offset); !stale {
				return nil
			}
		}
		return fmt.Errorf("raw: 3 calls of %s named a window the server's clock was not in", subject)
	}
}

// alignedStale reports whether v is AlignedWindow's answer to a call that
// named another window than the server's clock is in, {-1, seconds,
// microseconds} of the server's TIME, and then returns that time in
// milliseconds and stores its offset to the app's clock.
func alignedStale(v any, offset *atomic.Int64) (int64, bool) {
	ns := replyInts(v)
	if len(ns) != 3 || ns[0] != -1 {
		return 0, false
	}
	ms := ns[1]*1000 + ns[2]/1000
	offset.Store(ms - time.Now().UnixMilli())
	return ms, true
}

// replyInts reads a reply of any of the three clients as integers: an
// integer, or an array of integers and of integers as text (TIME's
// fields); nil for anything else.
func replyInts(v any) []int64 {
	switch x := v.(type) {
	case int64:
		return []int64{x}
	case []any:
		out := make([]int64, 0, len(x))
		for _, e := range x {
			var s string
			switch y := e.(type) {
			case int64:
				out = append(out, y)
				continue
			case string:
				s = y
			case []byte:
				s = string(y)
			default:
				return nil
			}
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil
			}
			out = append(out, n)
		}
		return out
	}
	return nil
}

func parseCallers(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1024 {
			return nil, fmt.Errorf("%w: -callers: %q is not a number of callers in [1, 1024]", errUsage, f)
		}
		if len(out) > 0 && n <= out[len(out)-1] {
			return nil, fmt.Errorf("%w: -callers must ascend", errUsage)
		}
		out = append(out, n)
	}
	return out, nil
}

func selectAdapters(names string) ([]adapter, error) {
	var out []adapter
	for _, n := range strings.Split(names, ",") {
		n = strings.TrimSpace(n)
		found := slices.ContainsFunc(out, func(ad adapter) bool { return ad.name == n }) // (named twice: measured once)
		for _, ad := range adapters() {
			if ad.name == n && !found {
				out, found = append(out, ad), true
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: unknown adapter %q (have: goredis, rueidis, redigo)", errUsage, n)
		}
	}
	return out, nil
}

// benchSVG draws results as a bar chart: for each adapter and level a bar
// of the Limiter's decisions/s over the raw EVALSHA's, with a line at 1.
// It is plain SVG, viewable in any browser or image viewer.
func benchSVG(backend string, results []benchRow) []byte {
	const (
		left, top, barH, gap, width = 300, 50, 22, 8, 500
	)
	top1 := 0.0
	for _, r := range results {
		top1 = max(top1, r.Ratio)
	}
	scale := float64(width) / max(1.25, top1*1.1)
	height := top + len(results)*(barH+gap) + 40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", left+width+80, height)
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14">limiter ÷ raw EVALSHA of the same script, decisions/s (one limit per call)</text>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="38" fill="#555">%s</text>`+"\n", html.EscapeString(backend))
	for i, r := range results {
		y := top + i*(barH+gap)
		w := r.Ratio * scale
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s %s, %s, %d callers</text>`+"\n", left-8, y+barH-6, html.EscapeString(r.Strategy), html.EscapeString(r.Workload), html.EscapeString(r.Adapter), r.Callers)
		fmt.Fprintf(&b, `<rect class="bar" x="%d" y="%d" width="%.1f" height="%d" fill="#4a7bb7"><title>%.0f vs %.0f decisions/s</title></rect>`+"\n", left, y, w, barH, r.LimiterPerSec, r.RawPerSec)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%.3f</text>`+"\n", float64(left)+w+6, y+barH-6, r.Ratio)
	}
	x1 := float64(left) + scale
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#c33" stroke-dasharray="4 3"/>`+"\n", x1, top-6, x1, height-34)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#c33">1 (as fast as raw)</text>`+"\n", x1, height-20)
	b.WriteString("</svg>\n")
	return []byte(b.String())
}
