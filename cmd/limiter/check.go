package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
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
	clusterAddrs := fs.String("cluster", "", "comma-separated nodes of a Redis Cluster, host:port or redis://[user:password@]host:port (rediss:// for TLS; one is enough: every master is found)")
	names := fs.String("checks", "", "comma-separated check names, of strategies' or store checks (default: all)")
	bad := fs.Bool("known-bad", false, "also run the known-bad controls, which must fail")
	verbose := fs.Bool("v", false, "print every check's messages")
	asJSON := fs.Bool("json", false, "print the report as one JSON object (the header goes to stderr)")
	var tf tlsFlags
	tf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return 0, err
	}
	sel, err := selectChecks(*names)
	if err != nil {
		return 0, err
	}

	conn := connOptions{}
	var server *limiter.ServerReport // the server's, when not miniredis
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
		backend = "redis at " + serverName(addr, conn) + " (shared: own prefix, no flush, no restart)"
		*url = addr
	case *clusterAddrs != "":
		addrs, o, err := parseClusterNodes(*clusterAddrs)
		if err != nil {
			return 0, err
		}
		if tf.set() {
			tf.cluster = true
		}
		if o.tls, err = tf.config(o.tls); err != nil {
			return 0, err
		}
		conn = o
		*clusterAddrs = strings.Join(addrs, ",")
		backend = "cluster at " + *clusterAddrs + over(conn) + " (shared: own prefix, no flush)"
	case tf.set():
		return 0, fmt.Errorf("%w: the -tls options need -redis rediss://... or -cluster", errUsage)
	}
	out := stdout // the header and the server's report
	if *asJSON {
		out = stderr
	}
	fmt.Fprintf(out, "limiter check: %s\n", backend)
	if *url != "" || *clusterAddrs != "" {
		fmt.Fprintln(out, "keys: under a prefix of its own per check (ct + 8 hex digits + :), deleted after the check")
		// The server's own report: what on it can make a limit fail, and
		// which strategies cannot run there (their checks skip).
		ad := adapters()[0]
		var st store.Store
		var closeFn func()
		var err error
		if *url != "" {
			st, closeFn, err = ad.single(conn)(ctx, *url)
		} else {
			addrs := strings.Split(*clusterAddrs, ",")
			err = isCluster(ctx, ad.single(conn), addrs[0])
			if err == nil {
				st, closeFn, err = ad.cluster(conn)(ctx, addrs)
			}
		}
		if err == nil {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			server, err = printServer(rctx, out, st)
			cancel()
			closeFn()
		}
		switch {
		case err != nil:
		case *url != "" && server.Mode == "cluster":
			// a single-server client cannot follow the slots: every
			// check would fail with MOVED
			err = fmt.Errorf("-redis %s: a Redis Cluster node: give its nodes with -cluster", maskUserinfo(*url))
		case server.Role == "slave":
			err = errors.New("a replica: run the checks against its primary")
		}
		if err != nil {
			// Every check would fail the same way: say why once.
			return 1, fmt.Errorf("cannot use the server: %w", err)
		}
	}
	fmt.Fprintln(out)

	// An interrupt (Ctrl-C, SIGTERM) starts no further check: the running
	// one finishes and deletes its keys, and the rows so far are reported.
	// A second interrupt ends the process at once.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	start := time.Now()
	var rows []row
	prog := newProgress(stderr, total(sel, *bad), start)
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
		// One check at a time, so that each row shows as it finishes.
		for _, sc := range sel.store {
			if why := cannotRunStore(sc, server); why != "" {
				rows = append(rows, prog.row(row{adapter: ad.name, Outcome: skipped("store", sc.Name, 0, why)}))
				continue
			}
			for _, o := range conformance.RunStoreChecks(ctx, maker(nil), []conformance.StoreCheck{sc}) {
				rows = append(rows, prog.row(row{adapter: ad.name, Outcome: o}))
			}
		}
		for _, spec := range conformance.Strategies() {
			for _, ch := range sel.checks {
				if !ch.For(spec) {
					continue
				}
				if why := cannotRun(spec, server); why != "" {
					rows = append(rows, prog.row(row{adapter: ad.name, Outcome: skipped(spec.Name, ch.Name, ch.ID, why)}))
					continue
				}
				for _, o := range conformance.Run(ctx, maker(nil), []conformance.Spec{spec}, []conformance.Check{ch}, false) {
					rows = append(rows, prog.row(row{adapter: ad.name, Outcome: o}))
				}
			}
		}
		if !*bad {
			continue
		}
		for _, ctl := range conformance.KnownBad() {
			ctl, ok := sel.control(ctl)
			if !ok {
				continue
			}
			name := ad.name
			if ctl.Store != "" {
				name += "+" + ctl.Store
			}
			// (a control that fails a check only because the server
			// refused what it needs has shown nothing)
			ctl, skips := runnable(ctl, server)
			for _, o := range skips {
				rows = append(rows, prog.row(row{adapter: name, expected: true, Outcome: o}))
			}
			if len(ctl.MustFail) == 0 {
				continue
			}
			for _, o := range conformance.RunControl(ctx, maker(ctl.Wrap), ctl, nil) {
				rows = append(rows, prog.row(row{adapter: name, expected: true, Outcome: o}))
			}
		}
	}
	prog.done()
	if ctx.Err() != nil {
		fmt.Fprintf(stderr, "limiter check: interrupted after %d of %d checks; the running check's keys were deleted\n", len(rows), prog.total)
	}
	var code int
	if *asJSON {
		code, err = reportJSON(stdout, backend, rows, time.Since(start), prog.total, ctx.Err() != nil)
	} else {
		code = report(stdout, rows, *verbose, time.Since(start))
	}
	if ctx.Err() != nil && err == nil {
		code = 1
	}
	return code, err
}

// total is the number of rows a run will report: per adapter, the
// selected store checks, each strategy's selected checks, and with
// -known-bad each control's.
func total(sel selection, bad bool) int {
	n := len(sel.store)
	for _, spec := range conformance.Strategies() {
		for _, ch := range sel.checks {
			if ch.For(spec) {
				n++
			}
		}
	}
	if bad {
		for _, ctl := range conformance.KnownBad() {
			ctl, _ = sel.control(ctl)
			n += len(ctl.MustFail)
		}
	}
	return n * len(adapters())
}

func containsName(checks []conformance.Check, name string) bool {
	for _, c := range checks {
		if c.Name == name {
			return true
		}
	}
	return false
}

// progress prints a line on stderr for each row as it finishes, and one at
// the start, so that a run of minutes shows it is alive.
type progress struct {
	w     io.Writer
	total int
	n     int
	start time.Time
}

func newProgress(w io.Writer, total int, start time.Time) *progress {
	fmt.Fprintf(w, "running %d checks...\n", total)
	return &progress{w: w, total: total, start: start}
}

// row prints r's line and returns r.
func (p *progress) row(r row) row {
	p.n++
	fmt.Fprintf(p.w, "[%d/%d %s] %s %s %s: %s\n", p.n, p.total, time.Since(p.start).Round(time.Second), r.Spec, r.adapter, r.Check, verdict(r))
	return r
}

func (p *progress) done() {
	fmt.Fprintf(p.w, "done: %d checks in %s\n\n", p.n, time.Since(p.start).Round(time.Millisecond))
}

// verdict is a row's RESULT.
func verdict(r row) string {
	switch {
	case r.Skipped:
		return "skip"
	case r.expected && r.FailedOnFinding():
		return "FAIL (expected)"
	case r.expected && !r.Passed:
		// on its harness only (a dial, a panic, a hang): the control's
		// mistake was not shown
		return "FAIL (harness)"
	case !r.Passed:
		return "FAIL"
	case r.expected:
		return "PASS (must fail)"
	}
	return "pass"
}

// jsonRow is one row of check -json.
type jsonRow struct {
	Strategy  string   `json:"strategy"`
	Adapter   string   `json:"adapter"`
	Check     string   `json:"check"`
	ID        int      `json:"id,omitempty"`
	Result    string   `json:"result"`
	KnownBad  bool     `json:"known_bad,omitempty"`
	ElapsedMS int64    `json:"elapsed_ms"`
	Note      string   `json:"note,omitempty"`
	Messages  []string `json:"messages,omitempty"`
}

// jsonReport is check -json's output.
type jsonReport struct {
	Backend string `json:"backend"`
	// Checks is how many rows the run was to report; Interrupted, that an
	// interrupt (Ctrl-C, SIGTERM) stopped it before all of them ran.
	Checks      int       `json:"checks"`
	Interrupted bool      `json:"interrupted,omitempty"`
	Passed      int       `json:"passed"`
	Failed      int       `json:"failed"`
	Skipped     int       `json:"skipped"`
	Caught      int       `json:"known_bad_caught"`
	ElapsedMS   int64     `json:"elapsed_ms"`
	Rows        []jsonRow `json:"rows"`
}

// reportJSON prints rows as one JSON object and returns the exit status.
// Results are "pass", "skip", "fail", "fail-expected" (a known-bad control
// failing on the check's own findings, as it must; one that failed only on
// its harness, a dial, a panic or a hang, is "fail") and "pass-unexpected"
// (a control that passed).
//
// checks is how many rows the run was to report, and interrupted says
// that an interrupt stopped it: the exit status is then 1 (as run sets it).
func reportJSON(w io.Writer, backend string, rows []row, took time.Duration, checks int, interrupted bool) (int, error) {
	rep := jsonReport{Backend: backend, Checks: checks, Interrupted: interrupted, ElapsedMS: took.Milliseconds(), Rows: []jsonRow{}}
	for _, r := range rows {
		res := "pass"
		switch {
		case r.Skipped:
			res = "skip"
			rep.Skipped++
		case r.expected && r.FailedOnFinding():
			res = "fail-expected"
			rep.Caught++
		case !r.Passed:
			res = "fail"
			rep.Failed++
		case r.expected:
			res = "pass-unexpected"
			rep.Failed++
		default:
			rep.Passed++
		}
		rep.Rows = append(rep.Rows, jsonRow{Strategy: r.Spec, Adapter: r.adapter, Check: r.Check, ID: r.ID, Result: res, KnownBad: r.expected,
			ElapsedMS: r.Elapsed.Milliseconds(), Note: r.SkipReason, Messages: r.Messages})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return 1, err
	}
	if rep.Failed > 0 || interrupted || nothingRan(rep.Passed, rep.Failed, rep.Caught, rep.Skipped) {
		return 1, nil
	}
	return 0, nil
}

// nothingRan reports a run whose selected checks all skipped: it verified
// nothing, and must not read as a pass.
func nothingRan(passed, failed, caught, skipped int) bool {
	return passed+failed+caught == 0 && skipped > 0
}

// over names the transport of conn for the report's first line.
func over(conn connOptions) string {
	if conn.tls != nil {
		return " over TLS"
	}
	return ""
}

// serverName names the server of -redis for the report: its address, its
// database unless it is 0, and TLS.
func serverName(addr string, conn connOptions) string {
	if conn.db != 0 {
		addr += fmt.Sprintf(", database %d", conn.db)
	}
	return addr + over(conn)
}

// cannotRun says why spec cannot run on the server r reports on (scripts
// refused, a version too old), or "" when it can or r is nil (miniredis).
func cannotRun(spec conformance.Spec, r *limiter.ServerReport) string {
	if r == nil || spec.Runs(*r) {
		return ""
	}
	if spec.Scripts && !r.Scripting {
		return "cannot run here: it needs scripts, which the server refuses (see the report above)"
	}
	return fmt.Sprintf("cannot run here: it needs Redis %s or later; the server runs %s", spec.MinVersion, r.Version)
}

// cannotRunStore says why the store check sc cannot run on the server r
// describes, or "".
func cannotRunStore(sc conformance.StoreCheck, r *limiter.ServerReport) string {
	if r == nil || !sc.Scripts || r.Scripting {
		return ""
	}
	return "cannot run here: it needs scripts, which the server refuses (see the report above)"
}

// skipped is the outcome of a check that cannot run on the server.
func skipped(spec, check string, id int, why string) conformance.Outcome {
	return conformance.Outcome{Spec: spec, Check: check, ID: id, Skipped: true, SkipReason: why, Messages: []string{why}}
}

// runnable returns ctl with only the checks it can run on the server r
// describes, and the skipped outcomes of the others.
func runnable(ctl conformance.Control, r *limiter.ServerReport) (conformance.Control, []conformance.Outcome) {
	var keep []string
	var skips []conformance.Outcome
	for _, n := range ctl.MustFail {
		why, spec, id := "", ctl.Spec.Name, 0
		if ch, ok := conformance.CheckByName(n); ok {
			why, id = cannotRun(ctl.Spec, r), ch.ID
		} else if sc, ok := conformance.StoreCheckByName(n); ok {
			why, spec = cannotRunStore(sc, r), "store"
		}
		if why != "" {
			skips = append(skips, skipped(spec, n, id, why))
			continue
		}
		keep = append(keep, n)
	}
	ctl.MustFail = keep
	return ctl, skips
}

// printServer prints limiter.CheckServer's report on st's server: what it
// is, what on it can make a limit fail, and which of the module's
// strategies can run there.
func printServer(ctx context.Context, w io.Writer, st store.Store) (*limiter.ServerReport, error) {
	r, err := limiter.CheckServer(ctx, st)
	if err != nil {
		return nil, err
	}
	scripts := "scripts allowed"
	if !r.Scripting {
		scripts = "scripts refused"
	}
	policy := r.MaxMemoryPolicy
	if policy == "" {
		policy = "unknown"
	}
	if r.Version == "" {
		// INFO refused (an ACL without it): nothing of it is known
		fmt.Fprintf(w, "server: Redis of unknown version, mode and maxmemory (INFO refused), %s\n", scripts)
	} else {
		parts := []string{"Redis " + r.Version}
		for _, p := range []string{r.Mode, r.Role} {
			if p != "" {
				parts = append(parts, p)
			}
		}
		parts = append(parts, fmt.Sprintf("maxmemory %d", r.MaxMemory), "maxmemory-policy "+policy, scripts)
		fmt.Fprintf(w, "server: %s\n", strings.Join(parts, ", "))
	}
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
	return &r, nil
}

// parseRedisURL reads a -redis URL: redis:// or rediss:// (TLS), or
// unix:///path/to/redis.sock, whose address is the socket's path.
func parseRedisURL(url string) (string, connOptions, error) {
	opt, err := parseURL("-redis", url)
	if err != nil {
		return "", connOptions{}, err
	}
	return opt.Addr, connOptions{username: opt.Username, password: opt.Password, db: opt.DB, tls: opt.TLSConfig}, nil
}

// parseURL parses the Redis URL raw given to flag, or returns a usage
// error that does not show its password: the parser's own error quotes
// the whole URL, and a password with a character that ends the host part
// ("/", "?", "#") or that the quoting escapes is the very reason some URLs
// do not parse. Its message is then the parse error of the URL with the
// password masked (maskUserinfo), or, when that one parses, a word on
// percent-encoding.
func parseURL(flag, raw string) (*redis.Options, error) {
	if !strings.Contains(raw, "://") {
		// A scheme mistyped or left out: the parser may take the rest
		// for something else, quoting the user information as a path or
		// an opaque part in its message, or, with no host, for the
		// default server on localhost:6379.
		return nil, fmt.Errorf("%w: %s: %s is not a URL of the form redis://[user:password@]host:port[/db] (rediss:// for TLS)", errUsage, flag, maskUserinfo(raw))
	}
	opt, err := redis.ParseURL(raw)
	if err == nil {
		if _, port, _ := net.SplitHostPort(opt.Addr); opt.Network != "unix" && !validPort(port) {
			// the parser takes any digits (":99999"), which the dial
			// then refuses as if the server were down
			return nil, fmt.Errorf("%w: %s: %s: the port must be 1 to 65535", errUsage, flag, maskUserinfo(raw))
		}
		return opt, nil
	}
	masked := maskUserinfo(raw)
	if masked == raw {
		return nil, fmt.Errorf("%w: %s: %w", errUsage, flag, err)
	}
	if _, merr := redis.ParseURL(masked); merr != nil {
		return nil, fmt.Errorf("%w: %s: %v", errUsage, flag, merr)
	}
	return nil, fmt.Errorf("%w: %s: cannot parse %s: its user or password holds a character to percent-encode (such as / ? # @ %% \" or \\)", errUsage, flag, masked)
}

// maskUserinfo returns the URL raw with the password of its user
// information (between "://" and the last "@") replaced by xxxxx, or the
// whole user information when it has no colon; raw as it is when it has
// none. Without "://" (a scheme mistyped) all before the last "@" is
// replaced: where the user begins cannot be told.
func maskUserinfo(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		if at := strings.LastIndex(raw, "@"); at >= 0 {
			return "xxxxx" + raw[at:]
		}
		return raw
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return raw
	}
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword {
		user = "xxxxx"
	} else {
		user += ":xxxxx"
	}
	return scheme + "://" + user + rest[at:]
}

// parseClusterNodes parses -cluster: nodes given as host:port, or as
// redis://[user:password@]host:port (rediss:// for TLS), whose user,
// password and TLS apply to every node; nodes that give them must agree.
func parseClusterNodes(list string) ([]string, connOptions, error) {
	var addrs []string
	var o connOptions
	from := ""
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			return nil, o, fmt.Errorf("%w: -cluster %q: an empty node", errUsage, list)
		}
		if !strings.Contains(n, "://") {
			if !isHostPort(n) {
				return nil, o, fmt.Errorf("%w: -cluster: %s is neither host:port nor a URL of the form redis://[user:password@]host:port (rediss:// for TLS)", errUsage, maskUserinfo(n))
			}
			addrs = append(addrs, n)
			continue
		}
		opt, err := parseURL("-cluster", n)
		if err != nil {
			return nil, o, err
		}
		if opt.Network == "unix" {
			return nil, o, fmt.Errorf("%w: -cluster: %s is a Unix socket; a Cluster's nodes are reached over TCP", errUsage, n)
		}
		if opt.DB != 0 {
			return nil, o, fmt.Errorf("%w: -cluster: %s names database %d; a Cluster has only database 0", errUsage, opt.Addr, opt.DB)
		}
		got := connOptions{username: opt.Username, password: opt.Password, tls: opt.TLSConfig}
		if from != "" && (got.username != o.username || got.password != o.password || (got.tls == nil) != (o.tls == nil)) {
			return nil, o, fmt.Errorf("%w: -cluster: %s and %s give different users, passwords or schemes; a Cluster's nodes share them", errUsage, from, opt.Addr)
		}
		from, o = opt.Addr, got
		addrs = append(addrs, opt.Addr)
	}
	if o.tls != nil {
		// ParseURL names the URL's host as the certificate's; a Cluster's
		// nodes (and those its slot map names) each have their own host,
		// which each dial takes from its address when none is set
		o.tls = o.tls.Clone()
		o.tls.ServerName = ""
	}
	return addrs, o, nil
}

// isHostPort reports whether s is host:port, the port a number, with
// nothing in it that belongs to a URL ("/", "@").
func isHostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" || strings.ContainsAny(s, "/@") {
		return false
	}
	return validPort(port)
}

// validPort reports whether port is a TCP port one can dial: 1 to 65535,
// in decimal.
func validPort(port string) bool {
	n, err := strconv.ParseUint(port, 10, 16)
	return err == nil && n > 0
}

func selectChecks(names string) (selection, error) {
	if names == "" {
		return selection{all: true, checks: conformance.Checks(), store: conformance.StoreChecks()}, nil
	}
	var sel selection
	for _, n := range strings.Split(names, ",") {
		n = strings.TrimSpace(n)
		if ch, ok := conformance.CheckByName(n); ok {
			if !containsName(sel.checks, n) {
				sel.checks = append(sel.checks, ch)
			}
			continue
		}
		if sc, ok := conformance.StoreCheckByName(n); ok {
			if !slices.ContainsFunc(sel.store, func(s conformance.StoreCheck) bool { return s.Name == n }) {
				sel.store = append(sel.store, sc)
			}
			continue
		}
		var all []string
		for _, c := range conformance.Checks() {
			all = append(all, c.Name)
		}
		for _, c := range conformance.StoreChecks() {
			all = append(all, c.Name)
		}
		return selection{}, fmt.Errorf("%w: unknown check %q (have: %s)", errUsage, n, strings.Join(all, ", "))
	}
	return sel, nil
}

// selection is what -checks selected: the strategies' checks and the store
// contract's, or all of both.
type selection struct {
	all    bool
	checks []conformance.Check
	store  []conformance.StoreCheck
}

// has reports whether the check or store check of that name is selected.
func (s selection) has(name string) bool {
	return s.all || containsName(s.checks, name) ||
		slices.ContainsFunc(s.store, func(sc conformance.StoreCheck) bool { return sc.Name == name })
}

// control returns ctl restricted to the selected checks, and whether any
// of its checks is selected.
func (s selection) control(ctl conformance.Control) (conformance.Control, bool) {
	if s.all {
		return ctl, true
	}
	var must []string
	for _, name := range ctl.MustFail {
		if s.has(name) {
			must = append(must, name)
		}
	}
	ctl.MustFail = must
	return ctl, len(must) > 0
}

// report prints the table and returns the exit status.
func report(w io.Writer, rows []row, verbose bool, took time.Duration) int {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STRATEGY\tADAPTER\tCHECK\tRESULT\tTIME\tNOTE")
	passed, failed, skipped, caught := 0, 0, 0, 0
	var details []string
	for _, r := range rows {
		v := verdict(r)
		switch {
		case r.Skipped:
			skipped++
		case r.expected && r.FailedOnFinding():
			caught++
		case !r.Passed, r.expected:
			failed++
		default:
			passed++
		}
		name := r.Check
		if r.ID > 0 {
			name = fmt.Sprintf("P%02d %s", r.ID, r.Check)
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s", r.Spec, r.adapter, name, v, r.Elapsed.Round(time.Millisecond))
		if r.SkipReason != "" {
			line += "\t" + r.SkipReason // why it skipped
		}
		fmt.Fprintln(tw, line)
		// (a control that failed on its harness alone fails the run: why
		// is printed too)
		if len(r.Messages) > 0 && (verbose || (!r.Passed && !r.Skipped && (!r.expected || !r.FailedOnFinding()))) {
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
	if nothingRan(passed, failed, caught, skipped) {
		fmt.Fprintln(w, "nothing was verified: every check selected skipped here (see the notes)")
		return 1
	}
	if failed > 0 {
		return 1
	}
	return 0
}

// isCluster reports, as an error, that the server at addr, given to
// -cluster, is no node of a Redis Cluster whose masters it can list.
func isCluster(ctx context.Context, d conformance.Dialer, addr string) error {
	st, closeFn, err := d(ctx, addr)
	if err != nil {
		return err
	}
	defer closeFn()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := conformance.ClusterMasters(rctx, st, addr); err != nil {
		msg := err.Error()
		switch {
		case strings.Contains(msg, "NOAUTH") || strings.Contains(msg, "WRONGPASS"):
			return fmt.Errorf("-cluster %s: the server needs a password (or another user) for this connection: give the node as redis://user:password@%s: %w", addr, addr, err)
		case strings.Contains(msg, "cluster support disabled"):
			return fmt.Errorf("-cluster %s: no Redis Cluster node (-redis is for a single server): %w", addr, err)
		}
		return fmt.Errorf("-cluster %s: %w", addr, err)
	}
	return nil
}
