package httplimit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/httplimit"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/internal/sfv"
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// dial connects go-redis to addr without retries (neither of a lost reply
// nor of a refused dial), closed with the test.
func dial(t *testing.T, addr string) store.Store {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	return goredis.New(rdb)
}

func newLimiter(t *testing.T, st store.Store, opts ...limiter.Option) *limiter.Limiter {
	t.Helper()
	lim, err := limiter.New(st, strategy.NewFixedWindow(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// method is the request path, as the method of an appkey+method rule.
func method(r *http.Request) (string, error) { return strings.Trim(r.URL.Path, "/"), nil }

var appkeyMethod = httplimit.Join("-", httplimit.Header("X-App-Key"), method)

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok\n") })

// response is what a test client saw.
type response struct {
	status int
	header http.Header
	body   string
}

func get(t *testing.T, c *http.Client, url, appkey string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if appkey != "" {
		req.Header.Set("X-App-Key", appkey)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, string(body)}
}

// wantFields checks the rate limit fields of a response against the
// draft's syntax and the expected values.
func wantFields(t *testing.T, r response, policies []sfv.Policy, bind string, remaining, reset int64) {
	t.Helper()
	if n := len(r.header.Values("RateLimit-Policy")); n != 1 {
		t.Errorf("%d RateLimit-Policy fields", n)
	}
	ps, err := sfv.ParsePolicy(r.header.Get("RateLimit-Policy"))
	if err != nil {
		t.Errorf("RateLimit-Policy: %v", err)
	}
	if len(ps) != len(policies) {
		t.Errorf("RateLimit-Policy %q: %d policies, want %d", r.header.Get("RateLimit-Policy"), len(ps), len(policies))
	}
	for i := range min(len(ps), len(policies)) {
		if ps[i] != policies[i] {
			t.Errorf("RateLimit-Policy item %d = %+v, want %+v", i, ps[i], policies[i])
		}
	}
	ls, err := sfv.ParseRateLimit(r.header.Get("RateLimit"))
	if err != nil {
		t.Errorf("RateLimit: %v", err)
	}
	if want := []sfv.ServiceLimit{{Name: bind, R: remaining, T: reset}}; len(ls) != 1 || ls[0] != want[0] {
		t.Errorf("RateLimit %q = %+v, want %+v", r.header.Get("RateLimit"), ls, want)
	}
	var rate int64 = -1
	for _, p := range policies {
		if p.Name == bind {
			rate = p.Q
		}
	}
	for name, want := range map[string]int64{"X-RateLimit-Limit": rate, "X-RateLimit-Remaining": remaining, "X-RateLimit-Reset": reset} {
		if got := r.header.Get(name); got != strconv.FormatInt(want, 10) {
			t.Errorf("%s = %q, want %d", name, got, want)
		}
	}
}

// TestMiddlewareHTTP: a real HTTP client gets 200s, then 429 with the
// binding rule's Retry-After and the draft's fields, on miniredis and on a
// real redis-server.
func TestMiddlewareHTTP(t *testing.T) {
	backends := map[string]func(t *testing.T) (string, *redistest.Mini){
		"miniredis": func(t *testing.T) (string, *redistest.Mini) {
			m := redistest.NewMini(t)
			return m.Addr(), m
		},
		"redis-server": func(t *testing.T) (string, *redistest.Mini) { return redistest.StartServer(t).Addr(), nil },
	}
	for name, start := range backends {
		t.Run(name, func(t *testing.T) {
			addr, mini := start(t)
			lim := newLimiter(t, dial(t, addr))
			subjects := map[string][]limiter.Limit{}
			for i := 1; i <= 3; i++ {
				subjects["app"+strconv.Itoa(i)+"-order.create"] = []limiter.Limit{limiter.PerSecond(3).Named("qps"), limiter.PerDay(1000).Named("qpd")}
			}
			rl, err := rules.New(context.Background(), lim, rules.Static(&rules.Set{Subjects: subjects}))
			if err != nil {
				t.Fatal(err)
			}
			mw, err := httplimit.New(rl, httplimit.WithKey(appkeyMethod))
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(mw.Handler(ok))
			defer srv.Close()
			c := srv.Client()
			policies := []sfv.Policy{{Name: "qps", Q: 3, W: 1}, {Name: "qpd", Q: 1000, W: 86400}}

			// A real server's 1 s window runs in real time: a run too slow to
			// fit in one window is repeated with another app key.
			for attempt := 1; ; attempt++ {
				appkey := "app" + strconv.Itoa(attempt)
				start := time.Now()
				var rs []response
				for i := 0; i < 5; i++ {
					rs = append(rs, get(t, c, srv.URL+"/order.create", appkey))
				}
				if mini == nil && time.Since(start) > 600*time.Millisecond && attempt < 3 {
					t.Logf("attempt %d took %s; repeating", attempt, time.Since(start))
					continue
				}
				for i, r := range rs[:3] {
					if r.status != http.StatusOK || r.body != "ok\n" || r.header.Get("Retry-After") != "" {
						t.Errorf("request %d: %d %q Retry-After %q; want 200 from the handler", i, r.status, r.body, r.header.Get("Retry-After"))
					}
					wantFields(t, r, policies, "qps", int64(2-i), 1)
				}
				for i, r := range rs[3:] {
					if r.status != http.StatusTooManyRequests {
						t.Errorf("request %d: %d, want 429", i+3, r.status)
					}
					if got := r.header.Get("Retry-After"); got != "1" {
						t.Errorf("request %d: Retry-After %q, want 1 (the qps window)", i+3, got)
					}
					wantFields(t, r, policies, "qps", 0, 1)
					var p struct {
						Type     string   `json:"type"`
						Status   int      `json:"status"`
						Violated []string `json:"violated-policies"`
					}
					if err := json.Unmarshal([]byte(r.body), &p); err != nil || r.header.Get("Content-Type") != "application/problem+json" ||
						p.Status != 429 || p.Type != httplimit.ProblemQuotaExceeded || len(p.Violated) != 1 || p.Violated[0] != "qps" {
						t.Errorf("429 body %q (%s): %+v, %v", r.body, r.header.Get("Content-Type"), p, err)
					}
					if len(r.body) > 200 {
						t.Errorf("429 body of %d bytes", len(r.body))
					}
				}
				if mini != nil {
					mini.Advance(time.Second)
					r := get(t, c, srv.URL+"/order.create", appkey)
					if r.status != http.StatusOK {
						t.Errorf("after Retry-After: %d", r.status)
					}
					wantFields(t, r, policies, "qps", 2, 1)
				}
				break
			}

			// Unknown subject: denied by the default, without fields.
			r := get(t, c, srv.URL+"/order.create", "stranger")
			if r.status != http.StatusTooManyRequests || r.header.Get("RateLimit") != "" || r.header.Get("Retry-After") != "" {
				t.Errorf("unknown subject: %d %v", r.status, r.header)
			}
			// No key: 400.
			if r := get(t, c, srv.URL+"/order.create", ""); r.status != http.StatusBadRequest {
				t.Errorf("no X-App-Key: %d", r.status)
			}
		})
	}
}

// TestNewFixed: fixed limits for every client IP.
func TestNewFixed(t *testing.T) {
	m := redistest.NewMini(t)
	lim := newLimiter(t, dial(t, m.Addr()))
	mw, err := httplimit.NewFixed(lim, "api", []limiter.Limit{limiter.PerMinute(2), limiter.Per(50, 1500*time.Millisecond).Named("burst")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Handler(ok))
	defer srv.Close()
	policies := []sfv.Policy{{Name: "per-1m", Q: 2, W: 60}, {Name: "burst", Q: 50}} // no w: not whole seconds
	for i := 0; i < 3; i++ {
		r := get(t, srv.Client(), srv.URL, "")
		if r.status != map[bool]int{true: 200, false: 429}[i < 2] {
			t.Errorf("request %d: %d", i, r.status)
		}
		wantFields(t, r, policies, "per-1m", int64(max(1-i, 0)), 60)
		if i == 2 && r.header.Get("Retry-After") != "60" {
			t.Errorf("Retry-After %q, want 60", r.header.Get("Retry-After"))
		}
	}
	if _, err := httplimit.NewFixed(lim, "api", nil); !errors.Is(err, rules.ErrInvalidConfig) {
		t.Errorf("NewFixed without limits: %v", err)
	}
}

// countObs counts what a limiter's observer is told.
type countObs struct {
	mu                          sync.Mutex
	decisions, degraded, errors int
}

func (o *countObs) OnDecision(_ context.Context, _ string, r limiter.Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.decisions++
	if r.Degraded {
		o.degraded++
	}
}

func (o *countObs) OnError(context.Context, string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.errors++
}

func (o *countObs) get() [3]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return [3]int{o.decisions, o.degraded, o.errors}
}

// TestFailModesRedisDown: Redis blackholed, then down. FailError answers
// 503, FailOpen serves the request without rate limit fields, FailClosed
// answers 503 with Retry-After; every request returns within its timeout,
// and the observer is told of each request exactly once per hook.
func TestFailModesRedisDown(t *testing.T) {
	for _, mode := range []limiter.FailMode{limiter.FailError, limiter.FailOpen, limiter.FailClosed} {
		t.Run(mode.String(), func(t *testing.T) {
			m := redistest.NewMini(t)
			p := redistest.NewProxy(t, m.Addr())
			var obs countObs
			const timeout = 100 * time.Millisecond
			st := dial(t, p.Addr())
			// Connect and load the script with no timeout: a busy machine
			// may take longer than 100ms over it.
			if _, err := newLimiter(t, st).Allow(context.Background(), "warm", limiter.PerMinute(100)); err != nil {
				t.Fatal(err)
			}
			lim := newLimiter(t, st, limiter.WithFailMode(mode), limiter.WithTimeout(timeout), limiter.WithObserver(&obs))
			mw, err := httplimit.NewFixed(lim, "api", []limiter.Limit{limiter.PerMinute(100).Named("qpm")}, httplimit.WithKey(httplimit.Header("X-App-Key")))
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(mw.Handler(ok))
			defer srv.Close()
			c := srv.Client()
			if r := get(t, c, srv.URL, "a"); r.status != 200 || r.header.Get("RateLimit") == "" {
				t.Fatalf("Redis up: %d %v", r.status, r.header)
			}
			requests := 1
			for _, state := range []string{"blackholed", "down"} {
				if state == "blackholed" {
					p.Blackhole(true)
				} else {
					p.Blackhole(false)
					_ = p.Close()
				}
				for i := 0; i < 3; i++ {
					start := time.Now()
					r := get(t, c, srv.URL, "a")
					requests++
					if took := time.Since(start); took > timeout+time.Second {
						t.Errorf("%s: request took %s with a %s timeout", state, took, timeout)
					}
					if r.header.Get("RateLimit") != "" || r.header.Get("RateLimit-Policy") != "" || r.header.Get("X-RateLimit-Remaining") != "" {
						t.Errorf("%s: rate limit fields on a decision Redis did not make: %v", state, r.header)
					}
					switch mode {
					case limiter.FailError:
						if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "" {
							t.Errorf("%s: %d Retry-After %q; want 503", state, r.status, r.header.Get("Retry-After"))
						}
					case limiter.FailOpen:
						if r.status != http.StatusOK || r.body != "ok\n" {
							t.Errorf("%s: %d %q; want 200 from the handler", state, r.status, r.body)
						}
					case limiter.FailClosed:
						if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "1" || !strings.Contains(r.body, "temporary-reduced-capacity") || strings.Contains(r.body, "violated-policies") {
							t.Errorf("%s: %d Retry-After %q %q; want 503 with Retry-After 1 and no violated policy", state, r.status, r.header.Get("Retry-After"), r.body)
						}
					}
				}
			}
			failed := requests - 1
			want := [3]int{1 + failed, failed, failed}
			if mode == limiter.FailError {
				want = [3]int{1, 0, failed}
			}
			if got := obs.get(); got != want {
				t.Errorf("observer told [decisions degraded errors] = %v for %d requests (%d with Redis unreachable), want %v", got, requests, failed, want)
			}
		})
	}
}

func TestClientIP(t *testing.T) {
	lb := netip.MustParsePrefix("10.0.0.0/8")
	v6lb := netip.MustParsePrefix("2001:db8:ffff::/48")
	cases := []struct {
		name    string
		trusted []netip.Prefix
		remote  string
		xff     []string
		want    string // "" = ErrNoKey
	}{
		{"peer", nil, "203.0.113.7:5555", nil, "203.0.113.7"},
		{"untrusted peer's XFF ignored", nil, "203.0.113.7:5555", []string{"1.2.3.4"}, "203.0.113.7"},
		{"untrusted peer with trusted list", []netip.Prefix{lb}, "203.0.113.7:1", []string{"1.2.3.4"}, "203.0.113.7"},
		{"behind a load balancer", []netip.Prefix{lb}, "10.0.0.2:1", []string{"198.51.100.9"}, "198.51.100.9"},
		{"spoofed XFF", []netip.Prefix{lb}, "10.0.0.2:1", []string{"1.1.1.1, 198.51.100.9"}, "198.51.100.9"},
		{"two trusted hops", []netip.Prefix{lb}, "10.0.0.2:1", []string{"6.6.6.6, 198.51.100.9, 10.1.1.1"}, "198.51.100.9"},
		{"several XFF lines", []netip.Prefix{lb}, "10.0.0.2:1", []string{"6.6.6.6", "198.51.100.9,10.1.1.1"}, "198.51.100.9"},
		{"trusted without XFF", []netip.Prefix{lb}, "10.0.0.2:1", nil, "10.0.0.2"},
		{"all trusted", []netip.Prefix{lb}, "10.0.0.2:1", []string{"10.0.0.9, 10.0.0.5"}, "10.0.0.9"},
		{"garbage hop", []netip.Prefix{lb}, "10.0.0.2:1", []string{"1.1.1.1, bogus"}, ""},
		{"garbage beyond the client is ignored", []netip.Prefix{lb}, "10.0.0.2:1", []string{"bogus, 198.51.100.9"}, "198.51.100.9"},
		{"IPv6 peer", nil, "[2001:db8::1]:443", nil, "2001:db8::1"},
		{"IPv6 behind IPv6 proxy", []netip.Prefix{v6lb}, "[2001:db8:ffff::2]:443", []string{"2001:db8::7"}, "2001:db8::7"},
		{"mapped IPv4", nil, "[::ffff:192.0.2.1]:80", nil, "192.0.2.1"},
		{"zone dropped", nil, "[fe80::1%eth0]:80", nil, "fe80::1"},
		{"no port", nil, "192.0.2.1", nil, "192.0.2.1"},
		{"garbage peer", nil, "pipe", nil, ""},
		{"XFF entries with ports", []netip.Prefix{lb}, "10.0.0.2:1", []string{"198.51.100.9:4711, 10.1.1.1:80"}, "198.51.100.9"},
		{"XFF IPv6 with port", []netip.Prefix{lb}, "10.0.0.2:1", []string{"[2001:db8::7]:443"}, "2001:db8::7"},
		{"XFF unknown: keyed by the proxy that wrote it", []netip.Prefix{lb}, "10.0.0.2:1", []string{"6.6.6.6, unknown, 10.1.1.1"}, "10.1.1.1"},
		{"XFF Unknown at the end", []netip.Prefix{lb}, "10.0.0.2:1", []string{"Unknown"}, "10.0.0.2"},
		// a trusted prefix in IPv4-mapped form is the IPv4 one (it never
		// matched: addresses are unmapped first)
		{"mapped trusted prefix", []netip.Prefix{netip.MustParsePrefix("::ffff:10.0.0.0/104")}, "10.0.0.2:1", []string{"198.51.100.9"}, "198.51.100.9"},
		{"mapped trusted prefix, mapped peer", []netip.Prefix{netip.MustParsePrefix("::ffff:10.0.0.0/104")}, "[::ffff:10.0.0.2]:1", []string{"198.51.100.9"}, "198.51.100.9"},
		{"mapped trusted prefix, peer outside", []netip.Prefix{netip.MustParsePrefix("::ffff:10.0.0.0/104")}, "11.0.0.2:1", []string{"198.51.100.9"}, "11.0.0.2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = c.remote
			for _, v := range c.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			got, err := httplimit.ClientIP(c.trusted...)(r)
			if c.want == "" {
				if !errors.Is(err, httplimit.ErrNoKey) {
					t.Errorf("= %q, %v; want ErrNoKey", got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("= %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestHeaderAndJoin(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/order.create", nil)
	if _, err := httplimit.Header("X-App-Key")(r); !errors.Is(err, httplimit.ErrNoKey) {
		t.Errorf("missing header: %v", err)
	}
	r.Header.Set("X-App-Key", "  app-9 ")
	if k, err := appkeyMethod(r); err != nil || k != "app%2D9-order.create" {
		t.Errorf("Join = %q, %v", k, err)
	}
	if _, err := httplimit.New(nil); !errors.Is(err, limiter.ErrInvalidOption) {
		t.Errorf("New(nil): %v", err)
	}
}

// TestWriteHeaders: the fields of odd decisions stay within the draft.
func TestWriteHeaders(t *testing.T) {
	big := limiter.Limit{Rate: limiter.MaxRate, Period: 250 * time.Millisecond, Name: `we"ird\name`}
	d := rules.Decision{
		Result: limiter.Result{Allowed: false, Remaining: 0, ResetAfter: 1200 * time.Millisecond, RetryAfter: 1200 * time.Millisecond, Limit: big},
		Rules:  []limiter.Limit{big, limiter.PerDay(5)},
	}
	h := http.Header{}
	httplimit.WriteHeaders(h, d, false)
	ps, err := sfv.ParsePolicy(h.Get("RateLimit-Policy"))
	if err != nil || len(ps) != 2 || ps[0] != (sfv.Policy{Name: `we"ird\name`, Q: 999_999_999_999_999}) || ps[1] != (sfv.Policy{Name: "per-1d", Q: 5, W: 86400}) {
		t.Errorf("RateLimit-Policy %q: %+v, %v", h.Get("RateLimit-Policy"), ps, err)
	}
	ls, err := sfv.ParseRateLimit(h.Get("RateLimit"))
	if err != nil || len(ls) != 1 || ls[0] != (sfv.ServiceLimit{Name: `we"ird\name`, R: 0, T: 2}) {
		t.Errorf("RateLimit %q: %+v, %v", h.Get("RateLimit"), ls, err)
	}
	if h.Get("Retry-After") != "2" || h.Get("X-RateLimit-Limit") != "" {
		t.Errorf("Retry-After %q (want 2, rounded up), legacy fields %v", h.Get("Retry-After"), h)
	}

	h = http.Header{}
	d.Degraded, d.RetryAfter = true, time.Second
	httplimit.WriteHeaders(h, d, true)
	if len(h) != 1 || h.Get("Retry-After") != "1" {
		t.Errorf("degraded denial: %v; want only Retry-After", h)
	}
	h = http.Header{}
	httplimit.WriteHeaders(h, rules.Decision{Result: limiter.Result{Allowed: false, RetryAfter: -1}, Default: true}, true)
	if len(h) != 0 {
		t.Errorf("default denial: %v; want no fields", h)
	}
}

// contended is a strategy whose every decision gives up under contention.
type contended struct{}

func (contended) Decide(context.Context, store.Store, limiter.Request) (limiter.Result, error) {
	return limiter.Result{}, fmt.Errorf("strategy: %w", limiter.ErrContention)
}

// TestContentionIs429: a request the limiter could not decide because its
// key was too contended is refused as rate limited (429, Retry-After), in
// FailOpen and FailClosed: never served, and not a 503 "Redis down"; its
// body names no rule as violated (it named the first, never reached).
// Under FailError, where the limiter returns limiter.ErrContention, the
// default error handler answers the same, headers and body (it answered
// 503 "cannot decide", though Redis had answered).
func TestContentionIs429(t *testing.T) {
	m := redistest.NewMini(t)
	st := dial(t, m.Addr())
	var first *httptest.ResponseRecorder
	for _, mode := range []limiter.FailMode{limiter.FailOpen, limiter.FailClosed, limiter.FailError} {
		lim, err := limiter.New(st, contended{}, limiter.WithFailMode(mode))
		if err != nil {
			t.Fatal(err)
		}
		mw, err := httplimit.NewFixed(lim, "api", []limiter.Limit{limiter.PerMinute(5).Named("qpm")}, httplimit.WithKey(httplimit.Header("X-Key")))
		if err != nil {
			t.Fatal(err)
		}
		served := false
		h := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true }))
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("X-Key", "hot")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if served || rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
			t.Errorf("%s: served=%v, status %d, Retry-After %q; want 429 with Retry-After, not served", mode, served, rec.Code, rec.Header().Get("Retry-After"))
		}
		if body := rec.Body.String(); !strings.Contains(body, `"violated-policies":[]`) {
			t.Errorf("%s: body %s; want no violated policy", mode, body)
		}
		if first == nil {
			first = rec
			continue
		}
		for _, h := range []string{"Retry-After", "Content-Type", "Cache-Control", "RateLimit", "RateLimit-Policy"} {
			if got, want := rec.Header().Get(h), first.Header().Get(h); got != want {
				t.Errorf("%s: %s %q; want %q, as under FailOpen", mode, h, got, want)
			}
		}
		if got, want := rec.Body.String(), first.Body.String(); got != want {
			t.Errorf("%s: body %q; want %q, as under FailOpen", mode, got, want)
		}
	}
}

// TestIPv6Prefix: IPv6 clients grouped by /64, IPv4 ones unchanged.
func TestIPv6Prefix(t *testing.T) {
	k := httplimit.IPv6Prefix(64, httplimit.ClientIP())
	for remote, want := range map[string]string{
		"[2001:db8:1:2:aaaa::1]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:bbbb::9]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:3::1]:443":      "2001:db8:1:3::/64",
		"192.0.2.1:80":               "192.0.2.1",
		"[::ffff:192.0.2.1]:80":      "192.0.2.1",
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		if got, err := k(r); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", remote, got, err, want)
		}
	}
}

// TestScopesNeverShare: two fixed middlewares on one Limiter, 3/min on
// /login and 100/min on /search, both keyed by client IP: searches never
// use up the logins, each scope counts under its own keys, and one scope
// given to two middlewares shares one budget.
func TestScopesNeverShare(t *testing.T) {
	m := redistest.NewMini(t)
	lim := newLimiter(t, dial(t, m.Addr()), limiter.WithPrefix("routes"))
	login, err := httplimit.NewFixed(lim, "login", []limiter.Limit{limiter.PerMinute(3)})
	if err != nil {
		t.Fatal(err)
	}
	search, err := httplimit.NewFixed(lim, "search", []limiter.Limit{limiter.PerMinute(100)})
	if err != nil {
		t.Fatal(err)
	}
	reset, err := httplimit.NewFixed(lim, "login", []limiter.Limit{limiter.PerMinute(3)})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/login", login.Handler(ok))
	mux.Handle("/search", search.Handler(ok))
	mux.Handle("/reset", reset.Handler(ok))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for i := range 5 {
		if r := get(t, srv.Client(), srv.URL+"/search", ""); r.status != 200 {
			t.Fatalf("search %d: %d", i, r.status)
		}
	}
	for i := range 2 {
		if r := get(t, srv.Client(), srv.URL+"/login", ""); r.status != 200 {
			t.Fatalf("login %d after 5 searches: %d; want 200 (the scopes count apart)", i, r.status)
		}
	}
	if r := get(t, srv.Client(), srv.URL+"/reset", ""); r.status != 200 {
		t.Fatalf("reset: %d", r.status)
	}
	if r := get(t, srv.Client(), srv.URL+"/login", ""); r.status != 429 {
		t.Fatalf("login after 2 logins and a reset in the same scope: %d; want 429", r.status)
	}
	keys := m.Keys()
	want := []string{"routes:login:{127.0.0.1}:60000ms", "routes:search:{127.0.0.1}:60000ms"}
	if len(keys) != 2 || keys[0] != want[0] || keys[1] != want[1] {
		t.Errorf("keys %q, want %q", keys, want)
	}
	for _, bad := range []string{"", "a b", "{x}", "é"} {
		if _, err := httplimit.NewFixed(lim, bad, []limiter.Limit{limiter.PerMinute(3)}); !errors.Is(err, limiter.ErrInvalidOption) {
			t.Errorf("scope %q: %v; want ErrInvalidOption", bad, err)
		}
	}
}

// logRecords is a slog.Handler that keeps its records.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecords) WithGroup(string) slog.Handler      { return h }

func (h *logRecords) attrs() []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]string
	for _, r := range h.recs {
		m := map[string]string{"msg": r.Message}
		r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
		out = append(out, m)
	}
	return out
}

// TestLogsDegradedOnce: with Redis blackholed, 5 requests decided by
// FailOpen (each Degraded) are logged once, with the error's kind and the
// error; 5 requests answered 503 under FailError, once more.
func TestLogsDegradedOnce(t *testing.T) {
	m := redistest.NewMini(t)
	p := redistest.NewProxy(t, m.Addr())
	st := dial(t, p.Addr())
	if _, err := newLimiter(t, st).Allow(context.Background(), "warm", limiter.PerMinute(100)); err != nil {
		t.Fatal(err)
	}
	var logs logRecords
	for _, mode := range []limiter.FailMode{limiter.FailOpen, limiter.FailError} {
		lim := newLimiter(t, st, limiter.WithFailMode(mode), limiter.WithTimeout(100*time.Millisecond))
		mw, err := httplimit.NewFixed(lim, "api-"+mode.String(), []limiter.Limit{limiter.PerMinute(100)}, httplimit.WithLogger(slog.New(&logs)))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(mw.Handler(ok))
		p.Blackhole(true)
		want := map[limiter.FailMode]int{limiter.FailOpen: 200, limiter.FailError: 503}[mode]
		for i := range 5 {
			if r := get(t, srv.Client(), srv.URL+"/x", ""); r.status != want {
				t.Errorf("%s, request %d with Redis blackholed: %d, want %d", mode, i, r.status, want)
			}
		}
		p.Blackhole(false)
		srv.Close()
	}
	got := logs.attrs()
	if len(got) != 2 {
		t.Fatalf("%d log lines for 10 undecided requests, want 2 (one per middleware): %v", len(got), got)
	}
	for i, l := range got {
		if (l["kind"] != "unknown_outcome" && l["kind"] != "timeout") || l["error"] == "" || l["path"] != "/x" || l["suppressed"] != "0" {
			t.Errorf("line %d: %v; want the kind (timeout or unknown_outcome), the error and the path", i, l)
		}
	}
	if !strings.Contains(got[0]["msg"], "degraded") || got[0]["scope"] != "api-"+limiter.FailOpen.String() || got[1]["scope"] != "api-"+limiter.FailError.String() {
		t.Errorf("lines %v", got)
	}
}

// TestRoute keys requests by the mux pattern that matched them.
func TestRoute(t *testing.T) {
	var got []string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, err := httplimit.Join(" ", httplimit.Route(), httplimit.ClientIP())(r)
		if err != nil {
			t.Errorf("%s: %v", r.URL.Path, err)
		}
		got = append(got, k)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /login", h)
	mux.Handle("GET /items/{id}", h)
	for _, req := range []*http.Request{httptest.NewRequest(http.MethodPost, "/login", nil), httptest.NewRequest(http.MethodGet, "/items/7", nil)} {
		mux.ServeHTTP(httptest.NewRecorder(), req)
	}
	want := []string{"POST%20/login 192.0.2.1", "GET%20/items/{id} 192.0.2.1"}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("keys %q, want %q", got, want)
	}
	if _, err := httplimit.Route()(httptest.NewRequest(http.MethodGet, "/", nil)); !errors.Is(err, httplimit.ErrNoKey) {
		t.Errorf("unrouted request: %v; want ErrNoKey", err)
	}
}

// TestPerRouteRules: a rule set that names routes, applied per client
// with WithRules(Route()): each client has its own counters of its
// route's rules, and a route without rules gets the Default.
func TestPerRouteRules(t *testing.T) {
	m := redistest.NewMini(t)
	lim := newLimiter(t, dial(t, m.Addr()))
	set := &rules.Set{
		Subjects: map[string][]limiter.Limit{
			"POST /login": {limiter.PerMinute(2).Named("login")},
			"GET /search": {limiter.PerMinute(100).Named("search")},
		},
		Default: rules.AllowUnknown(),
	}
	rl, err := rules.New(context.Background(), lim, rules.Static(set))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(rl, httplimit.WithRules(httplimit.Route()))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for _, p := range []string{"POST /login", "GET /search", "GET /free"} {
		mux.Handle(p, mw.Handler(ok))
	}
	do := func(method, path, client string) int {
		r := httptest.NewRequest(method, path, nil)
		r.RemoteAddr = client + ":1234"
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w.Code
	}
	a, b := "192.0.2.1", "192.0.2.2"
	for i := range 3 {
		if got, want := do(http.MethodPost, "/login", a), map[bool]int{true: 200, false: 429}[i < 2]; got != want {
			t.Fatalf("login %d of client a: %d, want %d", i, got, want)
		}
	}
	if got := do(http.MethodPost, "/login", b); got != 200 {
		t.Errorf("client b's first login: %d; want 200 (its own counters)", got)
	}
	if got := do(http.MethodGet, "/search", a); got != 200 {
		t.Errorf("client a's search after its logins ran out: %d; want 200 (the route's own rules)", got)
	}
	for i := range 5 {
		if got := do(http.MethodGet, "/free", a); got != 200 {
			t.Errorf("free %d: %d; want 200 (no rules: the Default allows)", i, got)
		}
	}
	if keys := m.Keys(); len(keys) != 3 {
		t.Errorf("keys %q; want the login counters of a and b and a's search counter", keys)
	}
}

// TestEmptyKeyIs400: a KeyFunc that returns an empty key names no client:
// the limiter refuses it before any I/O (ErrInvalidKey), and the request
// is answered 400, not as an outage (503, and a warning that would use up
// the log's budget for a real one).
func TestEmptyKeyIs400(t *testing.T) {
	m := redistest.NewMini(t)
	lim := newLimiter(t, dial(t, m.Addr()))
	rl, err := rules.New(context.Background(), lim, rules.Static(&rules.Set{Default: rules.LimitUnknown(limiter.PerMinute(5).Named("qpm"))}))
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	mw, err := httplimit.New(rl,
		httplimit.WithKey(func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil }),
		httplimit.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	mw.Handler(ok).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusBadRequest || logs.Len() > 0 {
		t.Errorf("empty key: %d %q, log %q; want 400 and no warning", rec.Code, rec.Body.String(), logs.String())
	}
	if keys := m.Keys(); len(keys) != 0 {
		t.Errorf("keys %q written for an empty key", keys)
	}
}
