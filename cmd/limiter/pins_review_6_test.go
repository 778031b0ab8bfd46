package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/benchkit"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/strategy"
)

// review6Row is a row whose every number differs from the others.
func review6Row() benchRow {
	return benchRow{Strategy: "gcra", Workload: "hot", Adapter: "redigo", Callers: 16,
		RawPerSec: 1000, LimiterPerSec: 900, Ratio: 0.9, RoundsMedian: 0.91, RoundsMin: 0.85, RoundsMax: 0.95,
		P50Micros: 120, P99Micros: 2500, RawP50Micros: 100, RawP99Micros: 1500, Allocs: 12.5, RawAllocs: 7}
}

// TestJSONFields: -json names each field of a row after what it
// holds, and round_ms is the round's length in milliseconds.
func TestJSONFields(t *testing.T) {
	var b bytes.Buffer
	if err := printBench(&b, true, "be", 3, 250*time.Millisecond, []benchRow{review6Row()}); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Backend string           `json:"backend"`
		Rounds  float64          `json:"rounds"`
		RoundMS float64          `json:"round_ms"`
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(b.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if rep.Backend != "be" || rep.Rounds != 3 || rep.RoundMS != 250 || len(rep.Results) != 1 {
		t.Fatalf("backend %q, rounds %v, round_ms %v, %d results; want be, 3, 250, 1", rep.Backend, rep.Rounds, rep.RoundMS, len(rep.Results))
	}
	want := map[string]any{"strategy": "gcra", "workload": "hot", "adapter": "redigo", "callers": 16.0,
		"raw_per_s": 1000.0, "limiter_per_s": 900.0, "ratio": 0.9, "rounds_median": 0.91, "rounds_min": 0.85, "rounds_max": 0.95,
		"p50_us": 120.0, "p99_us": 2500.0, "raw_p50_us": 100.0, "raw_p99_us": 1500.0, "allocs_per_call": 12.5, "raw_allocs_per_call": 7.0}
	got := rep.Results[0]
	for k, v := range want {
		if got[k] != v {
			t.Errorf("-json %q = %v, want %v", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("-json row has %d fields, want %d: %v", len(got), len(want), got)
	}
}

// TestTableColumns: the table puts each value under its heading:
// the limiter's latency and allocations first, raw's in parentheses, a
// latency of 1 ms or more in ms.
func TestTableColumns(t *testing.T) {
	var b bytes.Buffer
	if err := printBench(&b, false, "be", 3, 250*time.Millisecond, []benchRow{review6Row()}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want a heading and a row:\n%s", len(lines), b.String())
	}
	const want = "gcra hot redigo 16 1000 900 0.900 0.910, 0.850–0.950 120µs (100µs) 2.5ms (1.5ms) 12.5 (7.0)"
	if got := strings.Join(strings.Fields(lines[1]), " "); got != want {
		t.Errorf("row %q, want %q", got, want)
	}
}

// TestMeasureQuantilesPerSide: a level's p99 is its slow tail and
// raw's p99 is raw's: the limiter's calls take 30 ms one time in five and
// no time otherwise; raw's never take any. The limiter's p99 is at least
// 30 ms, its p50 and raw's p50 and p99 below it.
func TestMeasureQuantilesPerSide(t *testing.T) {
	const slow = 30 * time.Millisecond
	var n atomic.Int64
	raw := func(context.Context, string) error { return nil }
	lim := func(context.Context, string) error {
		if n.Add(1)%5 == 0 {
			time.Sleep(slow)
		}
		return nil
	}
	lv := level{kit: benchkit.NewKit([]int{1}), rounds: 2, round: 100 * time.Millisecond, allocCalls: 1, per: 1}
	var rows []benchRow
	if err := lv.measure(raw, lim, func(r benchRow) { rows = append(rows, r) }); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	r, us := rows[0], float64(slow/time.Microsecond)
	if r.P99Micros < us || r.P50Micros >= us || r.RawP50Micros >= us || r.RawP99Micros >= us {
		t.Errorf("limiter p50 %.0fµs, p99 %.0fµs; raw p50 %.0fµs, p99 %.0fµs; want the limiter's p99 at least %.0fµs and the others below",
			r.P50Micros, r.P99Micros, r.RawP50Micros, r.RawP99Micros, us)
	}
}

var allocSink []byte

// TestMeasureAllocsPerDecision: the allocations are each side's,
// per decision: a limiter call making 32 allocations and 16 decisions
// makes 2 per decision; raw's calls make none.
func TestMeasureAllocsPerDecision(t *testing.T) {
	raw := func(context.Context, string) error { return nil }
	lim := func(context.Context, string) error {
		for range 32 {
			allocSink = make([]byte, 64)
		}
		return nil
	}
	lv := level{kit: benchkit.NewKit([]int{1}), rounds: 1, round: 5 * time.Millisecond, allocCalls: 16 * 200, per: 16}
	var rows []benchRow
	if err := lv.measure(raw, lim, func(r benchRow) { rows = append(rows, r) }); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	if r := rows[0]; r.Allocs < 1.9 || r.Allocs > 2.2 || r.RawAllocs > 0.2 {
		t.Errorf("allocations per decision: limiter %.2f, raw %.2f; want 2 and 0", r.Allocs, r.RawAllocs)
	}
}

// TestManyDenialFailsTheLevel: a denial in the many workload
// (whose decisions must all be admitted) fails the level instead of being
// counted as a decision: a limit of 5 an hour is reached at once.
func TestManyDenialFailsTheLevel(t *testing.T) {
	m := redistest.NewMini(t)
	ctx := context.Background()
	st, closeFn, err := adapters()[0].single(connOptions{})(ctx, m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	sp := benchStrategy{name: "low", s: strategy.NewFixedWindow(), limit: limiter.PerHour(5)}
	var rows []benchRow
	err = benchAdapter(ctx, []int{1}, "goredis", st, sp, "many", 1, 20*time.Millisecond, 16, func(r benchRow) { rows = append(rows, r) })
	if err == nil || !strings.Contains(err.Error(), "denied in the many workload") || len(rows) != 0 {
		t.Errorf("many at 5/h: %v, rows %+v; want a denial failing the level, no row", err, rows)
	}
}

// TestManyCountsPerDecision: the many workload's allocations are
// per decision (each call makes 16): through the same client, no more
// than a few times a single EVALSHA's, where per call they were about 16
// times as many.
func TestManyCountsPerDecision(t *testing.T) {
	s := redistest.StartServer(t)
	ctx := context.Background()
	allocs := map[string]benchRow{}
	for _, wl := range []string{"admit", "many"} {
		st, closeFn, err := adapters()[0].single(connOptions{})(ctx, s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		sp := benchStrategies()[0] // fixedwindow
		err = benchAdapter(ctx, []int{1}, "goredis", st, sp, wl, 1, 5*time.Millisecond, 1600, func(r benchRow) { allocs[wl] = r })
		closeFn()
		if err != nil {
			t.Fatal(wl, err)
		}
	}
	a, m := allocs["admit"], allocs["many"]
	t.Logf("allocations per decision: admit %.1f (raw %.1f), many %.1f (raw %.1f)", a.Allocs, a.RawAllocs, m.Allocs, m.RawAllocs)
	if m.Allocs <= 0 || m.RawAllocs <= 0 || m.Allocs > 4*a.Allocs || m.RawAllocs > 4*a.RawAllocs {
		t.Errorf("many: %.1f allocations per decision (raw %.1f), admit %.1f (raw %.1f); want many's per decision within 4 times a single decision's",
			m.Allocs, m.RawAllocs, a.Allocs, a.RawAllocs)
	}
	assertNoKeys(t, s.Addr())
}

// TestSVGLabels: each bar of the chart is labelled with its own
// row's ratio, its tooltip reads the limiter's rate first ("limiter vs
// raw"), and the bars do not overlap.
func TestSVGLabels(t *testing.T) {
	rows := []benchRow{review6Row(), review6Row()}
	rows[1].Callers, rows[1].Ratio, rows[1].LimiterPerSec, rows[1].RoundsMedian = 64, 1.2, 1200, 1.15
	var svg struct {
		Rects []struct {
			Y      string `xml:"y,attr"`
			Height string `xml:"height,attr"`
			Title  string `xml:"title"`
		} `xml:"rect"`
		Texts []string `xml:"text"`
	}
	data := benchSVG("test", rows)
	if err := xml.Unmarshal(data, &svg); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if len(svg.Rects) != 2 {
		t.Fatalf("%d bars, want 2:\n%s", len(svg.Rects), data)
	}
	for i, want := range []string{"900 vs 1000 decisions/s", "1200 vs 1000 decisions/s"} {
		if svg.Rects[i].Title != want {
			t.Errorf("bar %d: tooltip %q, want %q", i, svg.Rects[i].Title, want)
		}
	}
	for _, want := range []string{"0.900", "1.200"} {
		if !slices.Contains(svg.Texts, want) {
			t.Errorf("no label %q among %q", want, svg.Texts)
		}
	}
	y0, _ := strconv.ParseFloat(svg.Rects[0].Y, 64)
	y1, _ := strconv.ParseFloat(svg.Rects[1].Y, 64)
	h, _ := strconv.ParseFloat(svg.Rects[0].Height, 64)
	if h <= 0 || y1 < y0+h {
		t.Errorf("bars at y %v and %v, %v high: they overlap", y0, y1, h)
	}
}
