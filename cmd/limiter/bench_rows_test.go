package main

import (
	"context"
	"encoding/xml"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/benchkit"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/strategy"
)

// TestBenchDenialsFailTheLevel: a call denied in a workload whose calls
// must be admitted (admit, and hot: every caller on the one subject "hot")
// fails the level instead of being counted as a decision: a limit of 5 a
// second is reached at once. (The hot workload counted denials, so a
// sliding log on one hot subject was measured mostly denying.)
func TestBenchDenialsFailTheLevel(t *testing.T) {
	m := redistest.NewMini(t)
	ctx := context.Background()
	for wl, want := range map[string]string{
		"admit": "limiter: user-00-0: allowed=false in the admit workload",
		"hot":   "limiter: hot: allowed=false in the hot workload",
	} {
		st, closeFn, err := adapters()[0].single(connOptions{})(ctx, m.Addr())
		if err != nil {
			t.Fatal(err)
		}
		sp := benchStrategy{name: "low", s: strategy.NewFixedWindow(), limit: limiter.PerSecond(5)}
		var rows []benchRow
		err = benchAdapter(ctx, []int{2}, "goredis", st, sp, wl, 1, 20*time.Millisecond, 20, func(r benchRow) { rows = append(rows, r) })
		closeFn()
		if err == nil || !strings.Contains(err.Error(), want) || len(rows) != 0 {
			t.Errorf("%s at 5/s: %v, rows %+v; want the error %q and no row", wl, err, rows, want)
		}
	}
}

// TestBenchSlidingLogNotHot: a sliding log is not measured on the hot
// workload (one subject of many callers asks more than its largest rate),
// and says so; asked for that alone, bench has nothing to measure.
func TestBenchSlidingLogNotHot(t *testing.T) {
	code, out, errOut := runCmd(t, "bench", "-strategies", "slidinglog,fixedwindow", "-workloads", "hot", "-adapters", "goredis",
		"-callers", "1", "-rounds", "1", "-round", "5ms", "-allocs", "1")
	if code != 0 || !strings.Contains(out, "slidinglog on the hot workload is not measured") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	rows := benchRows(t, out)
	if _, ok := rows["fixedwindow/hot/goredis/1"]; !ok || len(rows) != 1 {
		t.Errorf("rows %v; want fixedwindow's alone:\n%s", rows, out)
	}
	if code, _, errOut := runCmd(t, "bench", "-strategies", "slidinglog", "-workloads", "hot"); code != 2 || !strings.Contains(errOut, "nothing to measure") {
		t.Errorf("slidinglog on hot alone: exit %d, %s; want 2, nothing to measure", code, errOut)
	}
}

// TestMeasureRow: a level's row reads the limiter's side as the limiter's
// and the raw side as raw's: a limiter that sleeps 4 times per call
// against raw's once is slower in every round (its ratios, min, median and
// max below 1 and in order) and in its latencies.
func TestMeasureRow(t *testing.T) {
	sleeper := func(n int) benchkit.Decide {
		return func(context.Context, string) error {
			for range n {
				time.Sleep(200 * time.Microsecond)
			}
			return nil
		}
	}
	lv := level{kit: benchkit.NewKit([]int{1}), rounds: 3, round: 40 * time.Millisecond, allocCalls: 1, per: 1}
	var rows []benchRow
	if err := lv.measure(sleeper(1), sleeper(4), func(r benchRow) { rows = append(rows, r) }); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("%d rows, want 1", len(rows))
	}
	r := rows[0]
	if !(r.RoundsMin <= r.RoundsMedian && r.RoundsMedian <= r.RoundsMax && r.RoundsMax < 0.75 && r.RoundsMin > 0) {
		t.Errorf("rounds min %.3f, median %.3f, max %.3f; want 0 < min <= median <= max < 0.75", r.RoundsMin, r.RoundsMedian, r.RoundsMax)
	}
	if math.Abs(r.Ratio-r.LimiterPerSec/r.RawPerSec) > 1e-9 || r.Ratio >= 0.75 {
		t.Errorf("ratio %.3f of %.0f/%.0f; want their quotient, below 0.75", r.Ratio, r.LimiterPerSec, r.RawPerSec)
	}
	if r.P50Micros <= r.RawP50Micros || r.P99Micros < r.P50Micros || r.RawP99Micros < r.RawP50Micros {
		t.Errorf("p50 %.0fµs (raw %.0fµs), p99 %.0fµs (raw %.0fµs); want the limiter's p50 above raw's, each p99 at least its p50",
			r.P50Micros, r.RawP50Micros, r.P99Micros, r.RawP99Micros)
	}
}

// TestBenchSVGBarsMatchRatios: each bar is as long as its ratio on the
// chart's scale, the scale set by the line at 1.
func TestBenchSVGBarsMatchRatios(t *testing.T) {
	results := []benchRow{
		{Strategy: "fixedwindow", Workload: "admit", Adapter: "goredis", Callers: 1, Ratio: 0.5},
		{Strategy: "fixedwindow", Workload: "admit", Adapter: "goredis", Callers: 16, Ratio: 1},
		{Strategy: "fixedwindow", Workload: "admit", Adapter: "goredis", Callers: 64, Ratio: 2.5},
	}
	var svg struct {
		Rects []struct {
			X     string `xml:"x,attr"`
			Width string `xml:"width,attr"`
		} `xml:"rect"`
		Lines []struct {
			X1 string `xml:"x1,attr"`
			X2 string `xml:"x2,attr"`
		} `xml:"line"`
	}
	data := benchSVG("test", results)
	if err := xml.Unmarshal(data, &svg); err != nil {
		t.Fatalf("the SVG does not parse: %v\n%s", err, data)
	}
	if len(svg.Rects) != len(results) || len(svg.Lines) != 1 || svg.Lines[0].X1 != svg.Lines[0].X2 {
		t.Fatalf("%d bars, lines %+v; want %d bars and one vertical line:\n%s", len(svg.Rects), svg.Lines, len(results), data)
	}
	num := func(s string) float64 {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		return f
	}
	one := num(svg.Lines[0].X1)
	for i, r := range svg.Rects {
		x, w := num(r.X), num(r.Width)
		if unit := one - x; unit <= 0 || math.Abs(w-results[i].Ratio*unit) > 0.1 {
			t.Errorf("bar %d: x %v, width %v, the line at 1 at %v; want width %.3f × %v", i, x, w, one, results[i].Ratio, one-x)
		}
	}
	if last := num(svg.Rects[2].X) + num(svg.Rects[2].Width); last > 300+500 {
		t.Errorf("the longest bar ends at %v, past the chart's width", last)
	}
}
