package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/httplimit"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// demoRules are the rules of `limiter serve` without -rules.
const demoRules = `# The demo rules of limiter serve. The subject is "<X-App-Key>-<path>".
default:                       # any other appkey-method
  - {name: qps, rate: 2, period: 1s}
  - {name: qpd, rate: 100, period: 1d}
subjects:
  demo-order.create:
    - {name: qps, rate: 3, period: 1s}
    - {name: qpm, rate: 10, period: 1m}
    - {name: qpd, rate: 1000, period: 1d}
`

// defaultHash is the rule hash of `limiter serve`, the name such rule
// hashes are often given.
const defaultHash = "allRateLimitConfigs"

// serve runs `limiter serve`: a demo HTTP service whose every request is
// limited by the rules of its subject, "<X-App-Key>-<path>" ("ip-<client
// IP>-<path>" without an X-App-Key; see appkeyMethod). The rules come
// from a Redis hash (seeded from -rules or the demo rules when empty) or,
// with -rules and no -hash, from the file, and are reloaded every
// -interval. Redis is an embedded miniredis unless -redis is given.
// It runs until ctx is done or the process gets SIGINT or SIGTERM.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "listen address")
	url := fs.String("redis", "", "Redis URL (default: an embedded miniredis)")
	file := fs.String("rules", "", "rules file, JSON or YAML (default: the demo rules); without -hash the rules are read from it")
	hash := fs.String("hash", "", "Redis hash of rules, one field per appkey-method (default "+defaultHash+" unless -rules is given)")
	interval := fs.Duration("interval", time.Second, "how often the rules are reloaded")
	failMode := fs.String("fail-mode", "error", "what a request gets when Redis cannot decide: error (503), open (admitted) or closed (503 with Retry-After)")
	prefix := fs.String("prefix", limiter.DefaultPrefix, "key prefix of the counters")
	if err := parseFlags(fs, args); err != nil {
		return 0, err
	}
	mode, ok := map[string]limiter.FailMode{"error": limiter.FailError, "open": limiter.FailOpen, "closed": limiter.FailClosed}[*failMode]
	if !ok {
		return 0, fmt.Errorf("%w: -fail-mode %q: want error, open or closed", errUsage, *failMode)
	}
	if *interval <= 0 {
		return 0, fmt.Errorf("%w: -interval must be positive", errUsage)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	base, err := loadBase(ctx, *file)
	if err != nil {
		return 0, err
	}
	// The rules' fail_mode decides their requests; a -fail-mode given
	// beside another would be overridden without a word.
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "fail-mode" })
	if given && base.FailMode != nil && *base.FailMode != mode {
		return 0, fmt.Errorf("%w: -fail-mode %s, but the rules say fail_mode: %s, which decides their requests: give one", errUsage, *failMode, base.FailMode)
	}
	opt := &redis.Options{}
	if *url != "" {
		if opt, err = parseURL("-redis", *url); err != nil {
			return 0, err
		}
		if opt.TLSConfig != nil {
			// go-redis cannot see through TLS that the server closed an
			// idle connection: goredis.TLSDialer's connections can
			opt.Dialer = goredis.TLSDialer(&net.Dialer{Timeout: 5 * time.Second}, opt.TLSConfig)
			opt.TLSConfig = nil
		}
		fmt.Fprintf(stdout, "limiter serve: Redis at %s\n", opt.Addr)
	} else {
		m, err := redistest.StartMini()
		if err != nil {
			return 0, fmt.Errorf("embedded miniredis: %w", err)
		}
		defer m.Close()
		// The clock stops, and is waited for, before the embedded Redis
		// closes.
		cctx, stopClock := context.WithCancel(ctx)
		var clock sync.WaitGroup
		clock.Add(1)
		go func() {
			defer clock.Done()
			runClock(cctx, m)
		}()
		defer func() {
			stopClock()
			clock.Wait()
		}()
		opt.Addr = m.Addr()
		fmt.Fprintf(stdout, "limiter serve: embedded Redis (miniredis) at %s\n", m.Addr())
	}
	opt.MaxRetries = -1 // never re-send a limiter script whose reply was lost
	opt.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opt)
	defer rdb.Close()

	var stats serveStats
	lim, err := limiter.New(goredis.New(rdb), strategy.NewFixedWindow(),
		limiter.WithPrefix(*prefix), limiter.WithFailMode(mode),
		limiter.WithTimeout(250*time.Millisecond), limiter.WithObserver(&stats))
	if err != nil {
		return 0, err
	}

	var src rules.Source
	fromHash := *file == "" || *hash != ""
	if !fromHash {
		src = rules.File(*file)
		fmt.Fprintf(stdout, "limiter serve: rules from %s, reloaded every %s\n", *file, *interval)
	} else {
		if *hash == "" {
			*hash = defaultHash
		}
		seeded, err := seedHash(ctx, rdb, *hash, base)
		if err != nil {
			return 0, err
		}
		if seeded && *url != "" {
			// A hash serve wrote into a Redis it did not start goes with it.
			fmt.Fprintf(stdout, "limiter serve: wrote the rules into hash %q; it is deleted on exit\n", *hash)
			defer func() {
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				defer cancel()
				if err := rdb.Del(dctx, *hash).Err(); err != nil {
					fmt.Fprintf(stderr, "limiter serve: could not delete hash %q: %v\n", *hash, err)
				}
			}()
		}
		// (rules with a default alone seed nothing: the hash may be empty)
		src = rules.RedisHash{Store: goredis.New(rdb), Key: *hash, Default: base.Default, FailMode: base.FailMode, AllowEmpty: len(base.Subjects) == 0}
		fmt.Fprintf(stdout, "limiter serve: rules from Redis hash %q, reloaded every %s\n", *hash, *interval)
	}
	if given {
		// a reloaded file that names another fail mode is refused, as at
		// start-up: the last good rules stay
		src = failModeGuard{src: src, mode: mode}
	}
	var rl *rules.Limiter
	rl, err = rules.New(ctx, lim, src, rules.WithInterval(*interval), rules.WithReloadHook(func(err error) {
		if err != nil {
			fmt.Fprintf(stderr, "limiter serve: reload failed, the last good rules stay in force: %v\n", err)
			return
		}
		fmt.Fprintf(stderr, "limiter serve: rules reloaded: %s\n", describeSet(rl.Set()))
	}))
	if err != nil {
		return 0, err
	}
	mw, err := httplimit.New(rl, httplimit.WithKey(appkeyMethod),
		httplimit.WithDeniedHandler(func(w http.ResponseWriter, r *http.Request, d rules.Decision) {
			if d.Default && len(d.Rules) == 0 {
				// the rules' default denied it: no limiter decision
				// the observer would count
				stats.denied.Add(1)
			}
			httplimit.WriteDenied(w, r, d)
		}))
	if err != nil {
		return 0, err
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /-/rules", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, setJSON(rl.Set()))
	})
	mux.HandleFunc("GET /-/stats", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, stats.snapshot())
	})
	for _, p := range []string{"/-/rules", "/-/stats"} {
		// other methods: not the limited demo handler below
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		d, ok := mw.Decide(w, r)
		if !ok {
			return // denied, or not decided: answered
		}
		if d.Default && len(d.Rules) == 0 {
			// the rules' default admitted it: no limiter decision the
			// observer would count
			stats.allowed.Add(1)
		}
		subject, _ := appkeyMethod(r)
		fmt.Fprintf(w, "ok %s\n", subject)
	})

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return 0, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	u := "http://" + ln.Addr().String()
	fmt.Fprintf(stdout, "limiter serve: listening on %s\n", u)
	fmt.Fprintf(stdout, "  try:   for i in 1 2 3 4 5; do curl -si -H 'X-App-Key: demo' %s/order.create | grep -iE '^(HTTP|RateLimit|Retry)'; done\n", u)
	fmt.Fprintf(stdout, "  rules: curl %s/-/rules    stats: curl %s/-/stats\n", u, u)
	if fromHash {
		fmt.Fprintf(stdout, "  edit:  %s HSET %s demo-order.create '[{\"name\":\"qps\",\"rate\":5,\"period\":\"1s\"}]'\n", redisCLI(opt), *hash)
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = rl.Watch(ctx)
	}()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err = <-errc:
	case <-ctx.Done():
		stop() // a second interrupt ends the process at once
		// Requests in flight get 5 s to finish; then the connections
		// left (one that was opened and has sent nothing, as a browser's
		// preconnect, is never idle to Shutdown) are closed.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		err = srv.Shutdown(sctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			err = srv.Close()
		}
	}
	stop()
	wg.Wait()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return 0, err
	}
	fmt.Fprintln(stdout, "limiter serve: stopped")
	return 0, nil
}

// appkeyMethod is the subject of a request: its app key (X-App-Key) and
// method (the path, "index" for /) joined by httplimit.Join("-"). An app
// key and method without '-' or '%' read as "<appkey>-<method>", the names
// of the rules; in others those bytes are percent-encoded ("acme-eu" and
// "pay" give "acme%2Deu-pay"), so that two requests share a subject only
// when both app key and method are equal. A request without an app key is
// "ip-<client IP>-<method>": three parts, which no app key gives, so a
// client cannot name another's address as its app key and share its
// counters.
func appkeyMethod(r *http.Request) (string, error) {
	if s, err := byAppKey(r); !errors.Is(err, httplimit.ErrNoKey) {
		return s, err
	}
	return byIP(r)
}

var (
	byAppKey = httplimit.Join("-", httplimit.Header("X-App-Key"), method)
	byIP     = httplimit.Join("-", func(*http.Request) (string, error) { return "ip", nil }, httplimit.ClientIP(), method)
)

// method is the path of a request without its slashes, "index" for /.
func method(r *http.Request) (string, error) {
	if m := strings.Trim(r.URL.Path, "/"); m != "" {
		return m, nil
	}
	return "index", nil
}

// loadBase reads the rules file, or the demo rules.
func loadBase(ctx context.Context, file string) (*rules.Set, error) {
	if file == "" {
		return rules.ParseYAML([]byte(demoRules))
	}
	return rules.File(file).Load(ctx)
}

// seedHash writes base's subjects to the hash when it is missing or empty,
// in one HSET, and reports whether it did: a hash that holds rules is
// left as it is. The check and the write are one transaction (WATCH): a
// hash another client fills in between is left as that client wrote it,
// and is not taken for one this command created (and deletes at exit).
func seedHash(ctx context.Context, rdb *redis.Client, key string, base *rules.Set) (bool, error) {
	if len(base.Subjects) == 0 {
		return false, nil
	}
	var fields []any
	for subject, limits := range base.Subjects {
		v, err := rules.FormatRules(limits)
		if err != nil {
			return false, err
		}
		fields = append(fields, subject, string(v))
	}
	created := false
	err := rdb.Watch(ctx, func(tx *redis.Tx) error {
		n, err := tx.HLen(ctx, key).Result()
		if err != nil {
			return fmt.Errorf("HLEN %s: %w", key, err)
		}
		if n > 0 {
			return nil
		}
		if _, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, key, fields...)
			return nil
		}); err != nil {
			return err
		}
		created = true
		return nil
	}, key)
	switch {
	case errors.Is(err, redis.TxFailedErr):
		return false, nil // another client wrote the hash meanwhile
	case err != nil:
		return false, fmt.Errorf("seed %s: %w", key, err)
	}
	return created, nil
}

// runClock moves the embedded miniredis's clock with the wall clock, so
// that its keys expire in real time.
func runClock(ctx context.Context, m *redistest.Mini) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			m.Advance(now.Sub(last))
			last = now
		}
	}
}

// failModeGuard refuses a rule set whose fail_mode differs from the one
// -fail-mode gave: serve refuses the clash at start-up, and a reload must
// not apply it without a word.
type failModeGuard struct {
	src  rules.Source
	mode limiter.FailMode
}

// Load implements rules.Source.
func (g failModeGuard) Load(ctx context.Context) (*rules.Set, error) {
	set, err := g.src.Load(ctx)
	if err != nil {
		return nil, err
	}
	if set.FailMode != nil && *set.FailMode != g.mode {
		return nil, fmt.Errorf("the rules say fail_mode: %s, but -fail-mode is %s: not applied", set.FailMode, g.mode)
	}
	return set, nil
}

// serveStats counts decisions through the limiter's observer, and the
// requests the rules' default decides alone.
type serveStats struct {
	allowed, denied, degraded, errors atomic.Int64
}

func (s *serveStats) OnDecision(_ context.Context, _ string, r limiter.Result) {
	switch {
	case r.Degraded:
		s.degraded.Add(1)
	case r.Allowed:
		s.allowed.Add(1)
	default:
		s.denied.Add(1)
	}
}

func (s *serveStats) OnError(context.Context, string, error) { s.errors.Add(1) }

func (s *serveStats) snapshot() map[string]int64 {
	return map[string]int64{
		"allowed": s.allowed.Load(), "denied": s.denied.Load(),
		"degraded": s.degraded.Load(), "errors": s.errors.Load(),
	}
}

// setJSON is a rule set as /-/rules shows it.
func setJSON(s *rules.Set) map[string]any {
	subjects := map[string]json.RawMessage{}
	for subject, limits := range s.Subjects {
		v, _ := rules.FormatRules(limits)
		subjects[subject] = v
	}
	var def any = s.Default.Action.String()
	if s.Default.Action == rules.Limit {
		v, _ := rules.FormatRules(s.Default.Limits)
		def = json.RawMessage(v)
	}
	out := map[string]any{"default": def, "subjects": subjects}
	if s.FailMode != nil {
		out["fail_mode"] = s.FailMode.String()
	}
	return out
}

// describeSet summarises a rule set for the log.
func describeSet(s *rules.Set) string {
	names := make([]string, 0, len(s.Subjects))
	for k := range s.Subjects {
		names = append(names, k)
	}
	sort.Strings(names)
	return fmt.Sprintf("%d subjects %v, default %s", len(names), names, s.Default.Action)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// redisCLI is the redis-cli command that reaches the server of opt (its
// address, or its Unix socket): its database, user and TLS (the password
// is asked for, not printed).
func redisCLI(opt *redis.Options) string {
	var cmd string
	if h, p, err := net.SplitHostPort(opt.Addr); err == nil && opt.Network != "unix" {
		cmd = "redis-cli -h " + shellWord(h) + " -p " + shellWord(p)
	} else {
		cmd = "redis-cli -s " + shellWord(opt.Addr)
	}
	if opt.DB != 0 {
		cmd += " -n " + strconv.Itoa(opt.DB)
	}
	if opt.Username != "" {
		cmd += " --user " + shellWord(opt.Username)
	}
	if opt.Password != "" {
		cmd += " --askpass"
	}
	if opt.TLSConfig != nil {
		cmd += " --tls"
	}
	return cmd
}

// shellWord quotes s for a POSIX shell when it holds anything but letters,
// digits and -_.:/@%+=,
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
