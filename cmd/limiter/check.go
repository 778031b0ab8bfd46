package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/store"
)

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
	clusterAddrs := fs.String("cluster", "", "comma-separated host:port of every master of a Redis Cluster")
	names := fs.String("checks", "", "comma-separated check names (default: all)")
	bad := fs.Bool("known-bad", false, "also run the known-bad controls, which must fail")
	verbose := fs.Bool("v", false, "print every check's messages")
	var tf tlsFlags
	tf.register(fs)
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

	conn := connOptions{}
	backend := "embedded miniredis (a fresh one per check)"
	switch {
	case *url != "" && *clusterAddrs != "":
		return 0, fmt.Errorf("%w: -redis and -cluster exclude each other", errUsage)
	case *url != "":
		addr, o, err := parseRedisURL(*url)
		if err != nil {
			return 0, err
		}
		if o.tls, err = tf.config(o.tls); err != nil {
			return 0, err
		}
		conn = o
		backend = "redis at " + addr + over(conn) + " (shared: own prefix, no flush, no restart)"
		*url = addr
	case *clusterAddrs != "":
		if tf.set() {
			tf.cluster = true
		}
		if conn.tls, err = tf.config(nil); err != nil {
			return 0, err
		}
		backend = "cluster at " + *clusterAddrs + over(conn) + " (shared: own prefix, no flush)"
	case tf.set():
		return 0, fmt.Errorf("%w: the -tls options need -redis rediss://... or -cluster", errUsage)
	}
	fmt.Fprintf(stdout, "limiter check: %s\n", backend)
	if *url != "" || *clusterAddrs != "" {
		// The server's own report: what on it can make a limit fail.
		ad := adapters()[0]
		var st store.Store
		var closeFn func()
		var err error
		if *url != "" {
			st, closeFn, err = ad.single(conn)(ctx, *url)
		} else {
			st, closeFn, err = ad.cluster(conn)(ctx, strings.Split(*clusterAddrs, ","))
		}
		if err == nil {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err = printServer(rctx, stdout, st)
			cancel()
			closeFn()
		}
		if err != nil {
			// Every check would fail the same way: say why once.
			return 1, fmt.Errorf("cannot use the server: %w", err)
		}
	}
	fmt.Fprintln(stdout)

	start := time.Now()
	var rows []row
	for _, ad := range adapters() {
		maker := func(wrap func(store.Store) store.Store) conformance.HarnessMaker {
			d := conformance.WrapDialer(ad.single(conn), wrap)
			switch {
			case *url != "" && conn.tls != nil:
				return conformance.RedisAtTLS(*url, d)
			case *url != "":
				return conformance.RedisAt(*url, d)
			case *clusterAddrs != "":
				cd := ad.cluster(conn)
				wcd := func(ctx context.Context, addrs []string) (store.Store, func(), error) {
					st, closeFn, err := cd(ctx, addrs)
					if err == nil && wrap != nil {
						st = wrap(st)
					}
					return st, closeFn, err
				}
				return conformance.ClusterAt(strings.Split(*clusterAddrs, ","), wcd, ad.single(conn))
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

// over names the transport of conn for the report's first line.
func over(conn connOptions) string {
	if conn.tls != nil {
		return " over TLS"
	}
	return ""
}

// printServer prints limiter.CheckServer's report on st's server: what it
// is, what on it can make a limit fail, and which of the module's
// strategies can run there.
func printServer(ctx context.Context, w io.Writer, st store.Store) error {
	r, err := limiter.CheckServer(ctx, st)
	if err != nil {
		return err
	}
	scripts := "scripts allowed"
	if !r.Scripting {
		scripts = "scripts refused"
	}
	policy := r.MaxMemoryPolicy
	if policy == "" {
		policy = "unknown"
	}
	fmt.Fprintf(w, "server: Redis %s, %s, maxmemory %d, maxmemory-policy %s, %s\n", r.Version, r.Mode, r.MaxMemory, policy, scripts)
	var works []string
	for _, spec := range conformance.Strategies() {
		if spec.Runs(r) {
			works = append(works, spec.Name)
		}
	}
	fmt.Fprintf(w, "strategies here: %s\n", strings.Join(works, ", "))
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	return nil
}

// parseRedisURL reads a -redis URL (redis:// or rediss://).
func parseRedisURL(url string) (string, connOptions, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return "", connOptions{}, fmt.Errorf("%w: -redis: %w", errUsage, err)
	}
	return opt.Addr, connOptions{username: opt.Username, password: opt.Password, db: opt.DB, tls: opt.TLSConfig}, nil
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
	fmt.Fprintln(tw, "STRATEGY\tADAPTER\tCHECK\tRESULT\tTIME\tNOTE")
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
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s", r.Spec, r.adapter, name, verdict, r.Elapsed.Round(time.Millisecond))
		if r.SkipReason != "" {
			line += "\t" + r.SkipReason // why it skipped
		}
		fmt.Fprintln(tw, line)
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
