package main

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/benchkit"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
)

// TestBenchOnRedisURL runs a short bench on a real server: one row per
// adapter and level with positive rates and a ratio that is their quotient,
// and no key left behind.
func TestBenchOnRedisURL(t *testing.T) {
	s := redistest.StartServer(t)
	code, out, errOut := runCmd(t, "bench", "-allocs", "100", "-redis", "redis://"+s.Addr(), "-callers", "1,4", "-rounds", "2", "-round", "20ms")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	rows := benchRows(t, out)
	for _, ad := range []string{"goredis", "rueidis", "redigo"} {
		for _, c := range []string{"1", "4"} {
			f, ok := rows[ad+"/"+c]
			if !ok {
				t.Errorf("no row for %s with %s callers:\n%s", ad, c, out)
				continue
			}
			raw, lim, ratio := f[0], f[1], f[2]
			if raw <= 0 || lim <= 0 {
				t.Errorf("%s/%s: rates %v, %v", ad, c, raw, lim)
			}
			// The rates are printed rounded to 1/s and the ratio to 0.001:
			// the quotient of the printed rates is off by that much.
			tol := 0.0005 + 0.5*(1+ratio)/raw + 1e-9
			if d := ratio - lim/raw; d > tol || d < -tol {
				t.Errorf("%s/%s: ratio %.3f, but %.0f/%.0f = %.3f", ad, c, ratio, lim, raw, lim/raw)
			}
		}
	}
	assertNoKeys(t, s.Addr())
}

// TestBenchEmbedded runs the default backend for one adapter.
func TestBenchEmbedded(t *testing.T) {
	code, out, errOut := runCmd(t, "bench", "-allocs", "100", "-adapters", "rueidis", "-callers", "2", "-rounds", "1", "-round", "20ms")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if rows := benchRows(t, out); len(rows) != 1 || !strings.Contains(out, "embedded miniredis") {
		t.Errorf("want one row on the embedded miniredis:\n%s", out)
	}
}

// TestBenchNamesTwiceMeasuredOnce: a strategy, adapter or workload named
// twice is measured once (each was measured twice, in rows alike).
func TestBenchNamesTwiceMeasuredOnce(t *testing.T) {
	code, out, errOut := runCmd(t, "bench", "-strategies", "fixedwindow,fixedwindow", "-adapters", "rueidis, rueidis",
		"-workloads", "admit,admit", "-callers", "1", "-rounds", "1", "-round", "5ms", "-allocs", "1")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 7 && f[0] != "STRATEGY" {
			if _, err := strconv.Atoi(f[3]); err == nil {
				n++
			}
		}
	}
	if n != 1 {
		t.Errorf("%d rows; want 1:\n%s", n, out)
	}
}

func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "-callers", "0"}, {"bench", "-callers", "16,1"}, {"bench", "-callers", "1,1"}, {"bench", "-callers", "x"},
		{"bench", "-adapters", "nope"}, {"bench", "-rounds", "0"}, {"bench", "-allocs", "0"}, {"bench", "-redis", "http://x"}, {"bench", "extra"},
		{"bench", "-strategies", "bucketed"}, {"bench", "-workloads", "cold"},
		{"bench", "-rueidis-flush-delay", "-1us"}, {"bench", "-rueidis-flush-delay", "11ms"},
		// the flush delay of a client the run would not make
		{"bench", "-adapters", "goredis,redigo", "-rueidis-flush-delay", "20us"},
	} {
		if code, _, _ := runCmd(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

// benchRows parses the table: "adapter/callers" (prefixed with
// "strategy/workload/" when those are not fixedwindow and admit) -> raw/s,
// limiter/s, ratio.
func benchRows(t *testing.T, out string) map[string][3]float64 {
	t.Helper()
	rows := map[string][3]float64{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 7 || f[0] == "STRATEGY" {
			continue
		}
		if _, err := strconv.Atoi(f[3]); err != nil {
			continue
		}
		var v [3]float64
		for i := range v {
			x, err := strconv.ParseFloat(f[4+i], 64)
			if err != nil {
				t.Fatalf("bad number %q in %q", f[4+i], line)
			}
			v[i] = x
		}
		key := f[2] + "/" + f[3]
		if f[0] != "fixedwindow" || f[1] != "admit" {
			key = f[0] + "/" + f[1] + "/" + key
		}
		rows[key] = v
	}
	return rows
}

// TestBenchStrategiesAndWorkloads: every strategy and workload measures
// (but the sliding log on the hot workload), with latency quantiles and
// allocations in the JSON rows.
func TestBenchStrategiesAndWorkloads(t *testing.T) {
	s := redistest.StartServer(t)
	rep, _, _ := benchJSON(t, "-redis", "redis://"+s.Addr(), "-adapters", "rueidis", "-strategies", strings.Join(benchStrategyNames(), ","),
		"-workloads", "admit,deny,hot", "-callers", "2")
	if want := len(benchStrategyNames())*3 - 1; len(rep.Results) != want {
		t.Fatalf("%d results, want %d", len(rep.Results), want)
	}
	for _, r := range rep.Results {
		if r.Strategy == "slidinglog" && r.Workload == "hot" {
			t.Errorf("slidinglog measured on the hot workload: %+v", r)
		}
		if r.RawPerSec <= 0 || r.LimiterPerSec <= 0 || r.P50Micros <= 0 || r.P99Micros < r.P50Micros || r.RawP50Micros <= 0 || r.RawP99Micros < r.RawP50Micros || r.Allocs <= 0 || r.RawAllocs <= 0 {
			t.Errorf("result %+v", r)
		}
	}
	assertNoKeys(t, s.Addr())
}

// TestBenchJSON: -json prints one JSON object that parses, a result per
// adapter and level whose ratio is the quotient of its rates; the progress
// goes to stderr, a line per level.
func TestBenchJSON(t *testing.T) {
	rep, out, errOut := benchJSON(t, "-adapters", "goredis,redigo", "-callers", "1,2")
	if len(rep.Results) != 4 || !strings.Contains(rep.Backend, "embedded") {
		t.Fatalf("%d results on %q, want 4:\n%s", len(rep.Results), rep.Backend, out)
	}
	for _, r := range rep.Results {
		if r.RawPerSec <= 0 || r.LimiterPerSec <= 0 || r.Ratio != r.LimiterPerSec/r.RawPerSec {
			t.Errorf("result %+v", r)
		}
	}
	if !strings.Contains(errOut, "measuring 4 levels") || !strings.Contains(errOut, "[4/4] fixedwindow admit, redigo, 2 callers") {
		t.Errorf("progress on stderr:\n%s", errOut)
	}
}

// TestBenchFlushDelay: -rueidis-flush-delay gives the rueidis client that
// MaxFlushDelay, and the report says so.
func TestBenchFlushDelay(t *testing.T) {
	if d := rueidisOptions(connOptions{}, nil).MaxFlushDelay; d != 0 {
		t.Errorf("MaxFlushDelay %s by default, want 0 (rueidis's default)", d)
	}
	if d := rueidisOptions(connOptions{rueidisFlushDelay: 20 * time.Microsecond}, nil).MaxFlushDelay; d != 20*time.Microsecond {
		t.Errorf("MaxFlushDelay %s, want 20µs", d)
	}
	rep, out, _ := benchJSON(t, "-adapters", "rueidis,goredis", "-callers", "2", "-rueidis-flush-delay", "20us")
	if len(rep.Results) != 2 || !strings.HasSuffix(rep.Backend, "; rueidis with MaxFlushDelay 20µs") {
		t.Fatalf("%d results on %q, want 2, the flush delay named:\n%s", len(rep.Results), rep.Backend, out)
	}
}

// benchReport is what bench -json prints.
type benchReport struct {
	Backend string
	Results []benchRow
}

// benchJSON runs a short bench -json on the embedded server with args
// added and returns its report, its output and its stderr.
func benchJSON(t *testing.T, args ...string) (benchReport, string, string) {
	t.Helper()
	code, out, errOut := runCmd(t, append([]string{"bench", "-allocs", "100", "-json", "-rounds", "1", "-round", "20ms"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var rep benchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output does not parse: %v\n%s", err, out)
	}
	return rep, out, errOut
}

// TestBenchSVG: -svg writes an SVG that parses as XML, with a bar per
// adapter and level.
func TestBenchSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.svg")
	code, out, errOut := runCmd(t, "bench", "-allocs", "100", "-svg", path, "-adapters", "goredis,rueidis", "-callers", "1,2", "-rounds", "1", "-round", "20ms")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var svg struct {
		XMLName xml.Name
		Rects   []struct {
			Class string `xml:"class,attr"`
			Width string `xml:"width,attr"`
		} `xml:"rect"`
	}
	if err := xml.Unmarshal(data, &svg); err != nil {
		t.Fatalf("the SVG does not parse: %v\n%s", err, data)
	}
	if svg.XMLName.Local != "svg" || len(svg.Rects) != 4 {
		t.Fatalf("<%s> with %d bars, want <svg> with 4:\n%s", svg.XMLName.Local, len(svg.Rects), data)
	}
	for _, r := range svg.Rects {
		if w, err := strconv.ParseFloat(r.Width, 64); err != nil || w <= 0 || r.Class != "bar" {
			t.Errorf("bar %+v", r)
		}
	}
}

// TestBenchSVGPathFailsFirst: a chart path that cannot be written fails
// the command before it measures anything (it failed after the whole run,
// its results unprinted): a missing directory, and a directory.
func TestBenchSVGPathFailsFirst(t *testing.T) {
	dir := t.TempDir()
	for path, want := range map[string]string{filepath.Join(dir, "no-such-dir", "bench.svg"): "no-such-dir", dir: dir + " is a directory"} {
		code, out, errOut := runCmd(t, "bench", "-allocs", "100", "-svg", path, "-adapters", "goredis", "-callers", "1", "-rounds", "1", "-round", "20ms")
		if code == 0 || !strings.Contains(errOut, want) || strings.Contains(errOut, "measuring") {
			t.Errorf("bench -svg %s: exit %d\n%s\n%s; want a failure naming the path, before measuring", path, code, out, errOut)
		}
	}
}

// TestBenchSVGWriteFailsAfterTheResults: a chart that cannot be written
// once the run is over (a device that refuses writes) fails the command,
// but the results were printed first.
func TestBenchSVGWriteFailsAfterTheResults(t *testing.T) {
	const full = "/dev/full" // every write fails with ENOSPC
	if _, err := os.Stat(full); err != nil {
		t.Skipf("no %s on this system: %v", full, err)
	}
	code, out, errOut := runCmd(t, "bench", "-allocs", "100", "-svg", full, "-adapters", "goredis", "-callers", "1", "-rounds", "1", "-round", "20ms")
	if code == 0 || !strings.Contains(errOut, "no space") || !strings.Contains(out, "fixedwindow") || !strings.Contains(out, "LIMITER÷RAW") {
		t.Errorf("bench -svg %s: exit %d\nstdout:\n%s\nstderr:\n%s\nwant a failure writing the chart, after the results table", full, code, out, errOut)
	}
}

// TestRawBaselineCounts: the raw baseline of every strategy, through every
// adapter, decides what the Limiter decides: three raw calls leave the
// subject with 3 of 10 used, as the Limiter reads it (a sliding log's
// calls each add a member, with a nonce of their own).
func TestRawBaselineCounts(t *testing.T) {
	ctx := context.Background()
	l := limiter.Limit{Rate: 10, Burst: 10, Period: time.Hour}
	kit := benchkit.NewKit([]int{1})
	eachRawBaseline(t, "raw-check", func(ad string, sp benchStrategy, st store.Store, lim *limiter.Limiter) {
		keyOf, err := rawKeys(lim.Prefix(), l, kit)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := rawDecider(st, sp, l, keyOf)
		if err != nil {
			t.Fatal(err)
		}
		subject := ad + "-" + sp.name
		// the Limiter's first call loads the script
		if _, err := lim.Peek(ctx, "load", l); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := raw(ctx, subject); err != nil {
				t.Fatalf("%s, %s: raw call: %v", ad, sp.name, err)
			}
		}
		if r, err := lim.Peek(ctx, subject, l); err != nil || r.Remaining != 7 {
			t.Errorf("%s, %s: after 3 raw calls the Limiter reads %d remaining (%v), want 7", ad, sp.name, r.Remaining, err)
		}
	})
}

// eachRawBaseline calls f for every adapter and strategy bench measures,
// with a store of the adapter on a redis-server of the test's own and a
// Limiter of the strategy on it under prefix.
func eachRawBaseline(t *testing.T, prefix string, f func(adapter string, sp benchStrategy, st store.Store, lim *limiter.Limiter)) {
	t.Helper()
	s := redistest.StartServer(t)
	for _, ad := range adapters() {
		st, closeFn, err := ad.single(connOptions{})(context.Background(), s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(closeFn)
		for _, sp := range benchStrategies() {
			lim, err := limiter.New(st, sp.s, limiter.WithPrefix(prefix))
			if err != nil {
				t.Fatal(err)
			}
			f(ad.name, sp, st, lim)
		}
	}
}

// TestRawPipelineCounts: the many workload's raw baseline, through every
// adapter and for every strategy it measures, sends one EVALSHA per key
// that decides what the Limiter decides: three pipelines over 16 subjects
// leave each with 3 of 10 used, as the Limiter reads it.
func TestRawPipelineCounts(t *testing.T) {
	ctx := context.Background()
	l := limiter.Limit{Rate: 10, Burst: 10, Period: time.Hour}
	eachRawBaseline(t, "raw-pipeline", func(ad string, sp benchStrategy, st store.Store, lim *limiter.Limiter) {
		script, args, vary, err := manyArgs(sp, l, "unused")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Do(ctx, store.Cmd{Name: "SCRIPT", Args: []any{"LOAD", script.Source()}}); err != nil {
			t.Fatal(err)
		}
		prep, err := rawPipeline(st, script.Hash())
		if err != nil {
			t.Fatal(err)
		}
		pipe := prep(args, vary)
		var subjects, keys []string
		for i := range manyPerCall {
			sub := ad + "-" + sp.name + "-" + strconv.Itoa(i)
			k, err := limiter.Key(lim.Prefix(), sub, l)
			if err != nil {
				t.Fatal(err)
			}
			subjects, keys = append(subjects, sub), append(keys, k)
		}
		send := func(ctx context.Context, _ string) error { return pipe(ctx, keys, nil) }
		if sp.aligned {
			// (each key followed by the period and the window's index)
			send = alignedPipe(l, map[string][]string{"s": keys}, pipe)
		}
		for range 3 {
			if err := send(ctx, "s"); err != nil {
				t.Fatalf("%s, %s: raw pipeline: %v", ad, sp.name, err)
			}
		}
		for _, sub := range subjects {
			if r, err := lim.Peek(ctx, sub, l); err != nil || r.Remaining != 7 {
				t.Errorf("%s, %s: after 3 raw pipelines the Limiter reads %d remaining for %s (%v), want 7", ad, sp.name, r.Remaining, sub, err)
			}
		}
	})
}

// TestBenchMany: the many workload measures every strategy of the bench
// through every adapter on a real server, and leaves no key behind. (That
// its rates count 16 decisions per call: TestMeasureCountsEachDecision.)
func TestBenchMany(t *testing.T) {
	s := redistest.StartServer(t)
	names := benchStrategyNames()
	// (a later -round wins over benchJSON's)
	rep, _, _ := benchJSON(t, "-redis", "redis://"+s.Addr(), "-strategies", strings.Join(names, ","),
		"-workloads", "many", "-callers", "1", "-round", "50ms")
	if want := len(names) * 3; len(rep.Results) != want {
		t.Fatalf("%d results, want %d", len(rep.Results), want)
	}
	for _, r := range rep.Results {
		if r.Workload != "many" || r.RawPerSec <= 0 || r.LimiterPerSec <= 0 || r.Allocs <= 0 || r.RawAllocs <= 0 {
			t.Errorf("result %+v", r)
		}
	}
	assertNoKeys(t, s.Addr())
}

// TestMeasureCountsEachDecision: a level whose calls each make 16
// decisions reports 16 decisions per call. Each call of the fakes takes 2
// ms (a sleep): one caller makes at most 500 calls a second, 8000
// decisions, and at least 62 calls a second unless a 2 ms sleep takes 16 ms
// on average; a rate of calls would stay below 500.
func TestMeasureCountsEachDecision(t *testing.T) {
	var calls atomic.Int64
	call := func(context.Context, string) error {
		calls.Add(1)
		time.Sleep(2 * time.Millisecond)
		return nil
	}
	lv := level{kit: benchkit.NewKit([]int{1}), rounds: 2, round: 100 * time.Millisecond, allocCalls: 16, per: 16}
	var rows []benchRow
	if err := lv.measure(call, call, func(r benchRow) { rows = append(rows, r) }); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || calls.Load() == 0 {
		t.Fatalf("%d rows after %d calls; want 1", len(rows), calls.Load())
	}
	for _, v := range []float64{rows[0].RawPerSec, rows[0].LimiterPerSec} {
		if v < 1000 || v > 8000*1.05 {
			t.Errorf("%.0f decisions/s of calls of 16 decisions taking 2 ms each at one caller; want 1000 to 8000", v)
		}
	}
}

// TestAlignedStale: the raw baselines read AlignedWindow's "another
// window" answer (TIME's fields as text, as the clients return them) as
// the server's time and its offset to the app's clock, and nothing else
// as one.
func TestAlignedStale(t *testing.T) {
	var offset atomic.Int64
	sec := time.Now().Add(time.Hour).Unix()
	for _, v := range []any{
		[]any{int64(-1), strconv.FormatInt(sec, 10), "250000"},
		[]any{int64(-1), []byte(strconv.FormatInt(sec, 10)), []byte("250000")},
	} {
		ms, stale := alignedStale(v, &offset)
		if !stale || ms != sec*1000+250 {
			t.Errorf("%v: %d, %v; want %d, true", v, ms, stale, sec*1000+250)
		}
		if o := offset.Load(); o < 59*60*1000 || o > 61*60*1000 {
			t.Errorf("%v: offset %d ms; want about an hour", v, o)
		}
	}
	for _, v := range []any{int64(4503599627370495), []any{int64(1), int64(2), int64(3)}, []any{int64(1), int64(1700000000), int64(5)}} {
		if _, stale := alignedStale(v, &offset); stale {
			t.Errorf("%v read as another window", v)
		}
	}
}
