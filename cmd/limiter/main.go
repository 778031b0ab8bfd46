package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: limiter check [-redis URL] [-checks NAMES] [-known-bad] [-v]`

// errUsage marks a usage error (exit status 2).
var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	code, err := check(ctx, args[1:], stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "limiter:", err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return code
}

// adapter is one store adapter of the matrix: how to connect it to a Redis.
type adapter struct {
	name string
	dial func(opt *redis.Options) conformance.Dialer
}

func adapters() []adapter {
	return []adapter{{"goredis", dialGoRedis}}
}

// dialGoRedis connects go-redis with the options parsed from -redis (or the
// defaults), at the address the suite asks for.
func dialGoRedis(base *redis.Options) conformance.Dialer {
	return func(_ context.Context, addr string) (store.Store, func(), error) {
		opt := *base
		opt.Addr = addr
		rdb := redis.NewClient(&opt)
		return goredis.New(rdb), func() { _ = rdb.Close() }, nil
	}
}

// row is one line of the matrix.
type row struct {
	adapter  string
	expected bool // a known-bad control, expected to fail
	conformance.Outcome
}

func check(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("redis", "", "Redis URL (default: an embedded miniredis per check)")
	names := fs.String("checks", "", "comma-separated check names (default: all)")
	bad := fs.Bool("known-bad", false, "also run the known-bad controls, which must fail")
	verbose := fs.Bool("v", false, "print every check's messages")
	if err := fs.Parse(args); err != nil {
		return 0, fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return 0, fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	checks, err := selectChecks(*names)
	if err != nil {
		return 0, err
	}

	opt := &redis.Options{}
	backend := "embedded miniredis (a fresh one per check)"
	if *url != "" {
		if opt, err = redis.ParseURL(*url); err != nil {
			return 0, fmt.Errorf("%w: -redis: %w", errUsage, err)
		}
		backend = "redis at " + opt.Addr + " (shared: own prefix, no flush, no restart)"
	}
	fmt.Fprintf(stdout, "limiter check: %s\n\n", backend)

	start := time.Now()
	var rows []row
	for _, ad := range adapters() {
		maker := func(wrap func(store.Store) store.Store) conformance.HarnessMaker {
			d := conformance.WrapDialer(ad.dial(opt), wrap)
			if *url != "" {
				return conformance.RedisAt(opt.Addr, d)
			}
			return conformance.Miniredis(d)
		}
		for _, o := range conformance.Run(ctx, maker(nil), conformance.Strategies(), checks, *names == "") {
			rows = append(rows, row{adapter: ad.name, Outcome: o})
		}
		if !*bad {
			continue
		}
		var only []conformance.Check
		if *names != "" {
			only = checks
		}
		for _, ctl := range conformance.KnownBad() {
			name := ad.name
			if ctl.Store != "" {
				name += "+" + ctl.Store
			}
			for _, o := range conformance.RunControl(ctx, maker(ctl.Wrap), ctl, only) {
				rows = append(rows, row{adapter: name, expected: true, Outcome: o})
			}
		}
	}
	return report(stdout, rows, *verbose, time.Since(start)), nil
}

func selectChecks(names string) ([]conformance.Check, error) {
	if names == "" {
		return conformance.Checks(), nil
	}
	var out []conformance.Check
	for _, n := range strings.Split(names, ",") {
		ch, ok := conformance.CheckByName(strings.TrimSpace(n))
		if !ok {
			var all []string
			for _, c := range conformance.Checks() {
				all = append(all, c.Name)
			}
			return nil, fmt.Errorf("%w: unknown check %q (have: %s)", errUsage, n, strings.Join(all, ", "))
		}
		out = append(out, ch)
	}
	return out, nil
}

// report prints the table and returns the exit status.
func report(w io.Writer, rows []row, verbose bool, took time.Duration) int {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STRATEGY\tADAPTER\tCHECK\tRESULT\tTIME")
	passed, failed, skipped, caught := 0, 0, 0, 0
	var details []string
	for _, r := range rows {
		verdict := "pass"
		switch {
		case r.Skipped:
			verdict = "skip"
			skipped++
		case !r.Passed && r.expected:
			verdict = "FAIL (expected)"
			caught++
		case !r.Passed:
			verdict = "FAIL"
			failed++
		case r.expected:
			verdict = "PASS (must fail)"
			failed++
		default:
			passed++
		}
		name := r.Check
		if r.ID > 0 {
			name = fmt.Sprintf("P%02d %s", r.ID, r.Check)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Spec, r.adapter, name, verdict, r.Elapsed.Round(time.Millisecond))
		if len(r.Messages) > 0 && (verbose || (!r.Passed && !r.Skipped && !r.expected)) {
			details = append(details, fmt.Sprintf("%s/%s/%s:\n  %s", r.Spec, r.adapter, r.Check, strings.Join(r.Messages, "\n  ")))
		}
	}
	_ = tw.Flush()
	for _, d := range details {
		fmt.Fprintln(w, "\n"+d)
	}
	fmt.Fprintf(w, "\n%d passed, %d failed, %d skipped", passed, failed, skipped)
	if caught > 0 {
		fmt.Fprintf(w, "; %d known-bad failures caught as expected", caught)
	}
	fmt.Fprintf(w, " (%s)\n", took.Round(time.Millisecond))
	if failed > 0 {
		return 1
	}
	return 0
}
