package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alicebob/miniredis/v2"
	redigoredis "github.com/gomodule/redigo/redis"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/benchkit"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/store/redigo"
	rueidisstore "github.com/quotagate/limiter/store/rueidis"
	"github.com/quotagate/limiter/strategy"
)

// benchRate is never reached: every decision is admitted, so the raw call
// and the Limiter do the same work on the server.
const benchRate = 1 << 40

// bench compares, for each adapter, FixedWindow decisions through the
// Limiter with the client's own EVALSHA of the same script on the same keys
// (what a user writes by hand), in interleaved rounds.
func bench(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("redis", "", "Redis URL (default: an embedded miniredis, which measures the client side only)")
	callersFlag := fs.String("callers", "1,16,64", "comma-separated numbers of concurrent callers")
	rounds := fs.Int("rounds", benchkit.RatioRounds, "rounds per level; each runs raw and limiter once")
	round := fs.Duration("round", benchkit.RatioRoundTime, "how long each variant runs in a round")
	names := fs.String("adapters", "goredis,rueidis,redigo", "comma-separated adapters")
	asJSON := fs.Bool("json", false, "print the results as one JSON object (the header goes to stderr)")
	svgFile := fs.String("svg", "", "also write the results as an SVG bar chart to this file")
	if err := fs.Parse(args); err != nil {
		return 0, fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return 0, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	callers, err := parseCallers(*callersFlag)
	if err != nil {
		return 0, err
	}
	if *rounds < 1 || *round < time.Millisecond {
		return 0, fmt.Errorf("%w: -rounds must be at least 1 and -round at least 1ms", errUsage)
	}
	ads, err := selectAdapters(*names)
	if err != nil {
		return 0, err
	}

	addr, conn := "", connOptions{}
	backend := "embedded miniredis (in this process: the ratios show the client side only)"
	if *url != "" {
		if addr, conn, err = parseRedisURL(*url); err != nil {
			return 0, err
		}
		backend = "redis at " + addr + " (keys under limiter-bench:, deleted after)"
	} else {
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
	fmt.Fprintf(out, "limiter bench: FixedWindow, one limit, every call admitted; %s\n", backend)
	fmt.Fprintf(out, "%d rounds of %s per level, raw and limiter alternating\n\n", *rounds, *round)
	levels := len(ads) * len(callers)
	fmt.Fprintf(stderr, "measuring %d levels (about %s each)...\n", levels, time.Duration(*rounds)*2*(*round)+max(*round, benchkit.RatioWarmUp)*2)

	kit := benchkit.NewKit(callers)
	var results []benchRow
	for _, ad := range ads {
		st, closeFn, err := ad.single(conn)(ctx, addr)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", ad.name, err)
		}
		err = benchAdapter(ctx, kit, ad.name, st, *rounds, *round, func(r benchRow) {
			results = append(results, r)
			fmt.Fprintf(stderr, "[%d/%d] %s, %d callers: limiter ÷ raw %.3f\n", len(results), levels, r.Adapter, r.Callers, r.Ratio)
		})
		closeFn()
		if err != nil {
			return 0, fmt.Errorf("%s: %w", ad.name, err)
		}
	}
	fmt.Fprintln(stderr)
	if *svgFile != "" {
		if err := os.WriteFile(*svgFile, benchSVG(backend, results), 0o644); err != nil {
			return 0, err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return 0, enc.Encode(struct {
			Backend string     `json:"backend"`
			Rounds  int        `json:"rounds"`
			RoundMS int64      `json:"round_ms"`
			Results []benchRow `json:"results"`
		}{backend, *rounds, round.Milliseconds(), results})
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ADAPTER\tCALLERS\tRAW/S\tLIMITER/S\tLIMITER÷RAW\tROUNDS (MEDIAN, MIN–MAX)")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.3f\t%.3f, %.3f–%.3f\n", r.Adapter, r.Callers, r.RawPerSec, r.LimiterPerSec, r.Ratio, r.RoundsMedian, r.RoundsMin, r.RoundsMax)
	}
	return 0, tw.Flush()
}

// benchRow is one level's result: decisions per second of the raw EVALSHA
// and of the Limiter, their ratio over the whole level, and the ratios of
// its rounds.
type benchRow struct {
	Adapter       string  `json:"adapter"`
	Callers       int     `json:"callers"`
	RawPerSec     float64 `json:"raw_per_s"`
	LimiterPerSec float64 `json:"limiter_per_s"`
	Ratio         float64 `json:"ratio"`
	RoundsMedian  float64 `json:"rounds_median"`
	RoundsMin     float64 `json:"rounds_min"`
	RoundsMax     float64 `json:"rounds_max"`
}

// benchAdapter measures one adapter at every level of kit.
func benchAdapter(ctx context.Context, kit *benchkit.Kit, name string, st store.Store, rounds int, round time.Duration, done func(benchRow)) error {
	const prefix = "limiter-bench"
	lim, err := limiter.New(st, strategy.NewFixedWindow(), limiter.WithPrefix(prefix))
	if err != nil {
		return err
	}
	l := limiter.PerSecond(benchRate)
	key := func(subject string) string { return prefix + ":{" + subject + "}:1000ms" }
	raw, err := rawEvalSha(st, strategy.FixedWindowScript().Hash(), benchRate, l.Period.Milliseconds())
	if err != nil {
		return err
	}
	allow := func(ctx context.Context, subject string) error {
		res, err := lim.Allow(ctx, subject, l)
		if err == nil && !res.Allowed {
			err = errors.New("limiter: denied")
		}
		return err
	}
	rawDecide := func(ctx context.Context, subject string) error { return raw(ctx, key(subject)) }

	// The limiter's first call loads the script (EVAL after NOSCRIPT);
	// then one call of each on a fresh subject must leave one counter at 2.
	var subjects []string
	for _, ss := range kit.Subjects {
		subjects = append(subjects, ss...)
	}
	defer func() { _ = lim.Reset(context.WithoutCancel(ctx), "bench-check", l) }()
	for _, s := range subjects {
		defer func() { _ = lim.Reset(context.WithoutCancel(ctx), s, l) }()
		if k, err := limiter.Key(prefix, s, l); err != nil || k != key(s) {
			return fmt.Errorf("raw key %q, the limiter uses %q (%v)", key(s), k, err)
		}
	}
	if err := lim.Reset(ctx, "bench-check", l); err != nil {
		return err
	}
	if err := allow(ctx, "bench-check"); err != nil {
		return err
	}
	if err := rawDecide(ctx, "bench-check"); err != nil {
		return err
	}
	if res, err := lim.Peek(ctx, "bench-check", l); err != nil || res.Remaining != benchRate-2 {
		return fmt.Errorf("after one call of each, remaining %d (%v), want %d: raw and limiter count apart", res.Remaining, err, int64(benchRate-2))
	}

	for _, c := range kit.Callers {
		tallies, ratios, err := kit.Compare(c, rounds, max(round, benchkit.RatioWarmUp), round,
			[]benchkit.Variant{{Name: "raw", Decide: rawDecide}, {Name: "limiter", Decide: allow}})
		if err != nil {
			return err
		}
		rr, lr := tallies[0].Rate(), tallies[1].Rate()
		rs := ratios[1]
		done(benchRow{Adapter: name, Callers: c, RawPerSec: rr, LimiterPerSec: lr, Ratio: lr / rr, RoundsMedian: benchkit.Median(rs), RoundsMin: slices.Min(rs), RoundsMax: slices.Max(rs)})
	}
	return nil
}

// rawEvalSha returns the hand-written EVALSHA of the FixedWindow script for
// the client behind st: the key built per call, the arguments as a
// hand-written caller passes them, the reply read as integers.
func rawEvalSha(st store.Store, sha string, rate, windowMs int64) (func(ctx context.Context, key string) error, error) {
	// The script's reply to one limit that writes is {count, reset_ms}.
	admitted := func(n int64) error {
		if n > rate {
			return errors.New("raw: denied")
		}
		return nil
	}
	switch s := st.(type) {
	case *goredis.Store:
		rdb := s.Client()
		return func(ctx context.Context, key string) error {
			vals, err := rdb.EvalSha(ctx, sha, []string{key}, "1", "0", rate, windowMs).Int64Slice()
			if err != nil {
				return fmt.Errorf("raw: %w", err)
			}
			return admitted(vals[0])
		}, nil
	case *rueidisstore.Store:
		c := s.Client()
		return func(ctx context.Context, key string) error {
			cmd := c.B().Evalsha().Sha1(sha).Numkeys(1).Key(key).
				Arg("1", "0", strconv.FormatInt(rate, 10), strconv.FormatInt(windowMs, 10)).Build()
			nums, err := c.Do(ctx, cmd).AsIntSlice()
			if err != nil {
				return fmt.Errorf("raw: %w", err)
			}
			return admitted(nums[0])
		}, nil
	case *redigo.Store:
		p := s.Pool()
		return func(ctx context.Context, key string) error {
			conn, err := p.GetContext(ctx)
			if err != nil {
				return fmt.Errorf("raw: %w", err)
			}
			nums, err := redigoredis.Int64s(conn.Do("EVALSHA", sha, 1, key, "1", "0", rate, windowMs))
			_ = conn.Close()
			if err != nil {
				return fmt.Errorf("raw: %w", err)
			}
			return admitted(nums[0])
		}, nil
	}
	return nil, fmt.Errorf("no raw baseline for a %T", st)
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
		found := false
		for _, ad := range adapters() {
			if ad.name == n {
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
		left, top, barH, gap, width = 150, 50, 22, 8, 500
	)
	top1 := 0.0
	for _, r := range results {
		top1 = max(top1, r.Ratio)
	}
	scale := float64(width) / max(1.25, top1*1.1)
	height := top + len(results)*(barH+gap) + 40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", left+width+80, height)
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14">limiter ÷ raw EVALSHA, decisions/s (FixedWindow, one limit, every call admitted)</text>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="38" fill="#555">%s</text>`+"\n", html.EscapeString(backend))
	for i, r := range results {
		y := top + i*(barH+gap)
		w := r.Ratio * scale
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s, %d callers</text>`+"\n", left-8, y+barH-6, html.EscapeString(r.Adapter), r.Callers)
		fmt.Fprintf(&b, `<rect class="bar" x="%d" y="%d" width="%.1f" height="%d" fill="#4a7bb7"><title>%.0f vs %.0f decisions/s</title></rect>`+"\n", left, y, w, barH, r.LimiterPerSec, r.RawPerSec)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%.3f</text>`+"\n", float64(left)+w+6, y+barH-6, r.Ratio)
	}
	x1 := float64(left) + scale
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#c33" stroke-dasharray="4 3"/>`+"\n", x1, top-6, x1, height-34)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#c33">1 (as fast as raw)</text>`+"\n", x1, height-20)
	b.WriteString("</svg>\n")
	return []byte(b.String())
}
