package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/internal/sfv"
)

// syncBuffer is a bytes.Buffer safe for the server's and the test's
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// served is a running `limiter serve`.
type served struct {
	url, redis     string
	stdout, stderr *syncBuffer
	stop           func() int
}

var (
	listenRe = regexp.MustCompile(`listening on (http://\S+)`)
	miniRe   = regexp.MustCompile(`embedded Redis \(miniredis\) at (\S+)`)
)

// startServe runs `limiter serve args...` until the test ends, and waits
// for it to listen.
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, append([]string{"serve", "-addr", "127.0.0.1:0"}, args...), s.stdout, s.stderr)
	}()
	var once sync.Once
	exit := -1
	s.stop = func() int {
		once.Do(func() {
			cancel()
			select {
			case exit = <-code:
			case <-time.After(10 * time.Second):
				t.Errorf("serve did not stop within 10s")
			}
		})
		return exit
	}
	t.Cleanup(func() { s.stop() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := listenRe.FindStringSubmatch(s.stdout.String()); m != nil {
			s.url = m[1]
			break
		}
		select {
		case c := <-code:
			t.Fatalf("serve exited %d before listening\nstdout: %s\nstderr: %s", c, s.stdout, s.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not listen within 10s\nstdout: %s\nstderr: %s", s.stdout, s.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if m := miniRe.FindStringSubmatch(s.stdout.String()); m != nil {
		s.redis = m[1]
	}
	return s
}

type reply struct {
	status int
	header http.Header
	body   string
}

func fetch(t *testing.T, url, appkey string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if appkey != "" {
		req.Header.Set("X-App-Key", appkey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// burst sends n requests for appkey to path as fast as it can; a burst
// that did not fit in one second is sent again after the window passed
// (the embedded Redis runs on the wall clock), at most three times.
func burst(t *testing.T, url, appkey string, n int) []reply {
	t.Helper()
	for attempt := 1; ; attempt++ {
		start := time.Now()
		var rs []reply
		for i := 0; i < n; i++ {
			rs = append(rs, fetch(t, url, appkey))
		}
		if took := time.Since(start); took < 600*time.Millisecond || attempt == 3 {
			return rs
		}
		t.Logf("burst %d took %s; repeating after the window", attempt, time.Since(start))
		time.Sleep(1100 * time.Millisecond)
	}
}

// wantLimited checks a burst of the demo subject: qps 3 admits three, then
// 429 with Retry-After and the draft's fields naming qps.
func wantLimited(t *testing.T, rs []reply, policy []sfv.Policy) {
	t.Helper()
	for i, r := range rs {
		want := http.StatusOK
		if i >= 3 {
			want = http.StatusTooManyRequests
		}
		if r.status != want {
			t.Errorf("request %d: %d %q, want %d", i, r.status, r.body, want)
			continue
		}
		ps, err := sfv.ParsePolicy(r.header.Get("RateLimit-Policy"))
		if err != nil || len(ps) != len(policy) {
			t.Errorf("request %d: RateLimit-Policy %q: %+v, %v", i, r.header.Get("RateLimit-Policy"), ps, err)
		}
		for j := range min(len(ps), len(policy)) {
			if ps[j] != policy[j] {
				t.Errorf("request %d: policy %d = %+v, want %+v", i, j, ps[j], policy[j])
			}
		}
		ls, err := sfv.ParseRateLimit(r.header.Get("RateLimit"))
		wantR := int64(max(2-i, 0))
		if err != nil || len(ls) != 1 || ls[0] != (sfv.ServiceLimit{Name: "qps", R: wantR, T: 1}) {
			t.Errorf("request %d: RateLimit %q: %+v, %v; want qps r=%d t=1", i, r.header.Get("RateLimit"), ls, err, wantR)
		}
		if got := r.header.Get("X-RateLimit-Limit") + "/" + r.header.Get("X-RateLimit-Remaining") + "/" + r.header.Get("X-RateLimit-Reset"); got != "3/"+string(rune('0'+wantR))+"/1" {
			t.Errorf("request %d: X-RateLimit-Limit/Remaining/Reset = %s", i, got)
		}
		wantRetry := ""
		if i >= 3 {
			wantRetry = "1"
		}
		if got := r.header.Get("Retry-After"); got != wantRetry {
			t.Errorf("request %d: Retry-After %q, want %q", i, got, wantRetry)
		}
	}
}

var demoPolicy = []sfv.Policy{{Name: "qps", Q: 3, W: 1}, {Name: "qpm", Q: 10, W: 60}, {Name: "qpd", Q: 1000, W: 86400}}

// waitFor polls cond until it holds or 5 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeDemo runs the one-command demo: embedded Redis, demo rules in
// a Redis hash of appkey+method rules. A client gets 200s, then 429; an edit of the hash takes
// effect without restarting; a malformed edit is reported and ignored.
func TestServeDemo(t *testing.T) {
	s := startServe(t, "-interval", "50ms")
	if s.redis == "" {
		t.Fatalf("no embedded Redis address in %q", s.stdout)
	}
	wantLimited(t, burst(t, s.url+"/order.create", "demo", 4), demoPolicy)

	// Another appkey gets the default rules; no key at all, the client IP.
	if r := fetch(t, s.url+"/order.create", "other"); r.status != 200 || !strings.HasPrefix(r.header.Get("RateLimit-Policy"), `"qps";q=2;w=1,`) {
		t.Errorf("default rules: %d %v", r.status, r.header)
	}
	if r := fetch(t, s.url+"/x", ""); r.status != 200 || r.body != "ok ip-127.0.0.1-x\n" {
		t.Errorf("by client IP: %d %q", r.status, r.body)
	}

	rdb := redis.NewClient(&redis.Options{Addr: s.redis})
	defer rdb.Close()
	ctx := context.Background()
	rulesOf := func() string {
		var v struct {
			Subjects map[string]json.RawMessage `json:"subjects"`
		}
		r := fetch(t, s.url+"/-/rules", "")
		if err := json.Unmarshal([]byte(r.body), &v); err != nil {
			t.Fatalf("/-/rules: %v: %s", err, r.body)
		}
		var b bytes.Buffer
		_ = json.Compact(&b, v.Subjects["demo-order.create"])
		return b.String()
	}
	edited := `[{"name":"qps","rate":5,"period":"1s"},{"name":"qpd","rate":1000,"period":"1d"}]`
	if err := rdb.HSet(ctx, defaultHash, "demo-order.create", edited).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the hash edit", func() bool { return rulesOf() == edited })
	r := fetch(t, s.url+"/order.create", "demo")
	if got := r.header.Get("RateLimit-Policy"); got != `"qps";q=5;w=1, "qpd";q=1000;w=86400` {
		t.Errorf("after the edit: RateLimit-Policy %q", got)
	}
	if !strings.Contains(s.stderr.String(), "rules reloaded") {
		t.Errorf("no reload in the log: %s", s.stderr)
	}

	if err := rdb.HSet(ctx, defaultHash, "demo-order.create", `[{"name":"qps","rate":"many","period":"1s"}]`).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the malformed edit's report", func() bool { return strings.Contains(s.stderr.String(), "reload failed") })
	if !strings.Contains(s.stderr.String(), `"demo-order.create"[0].rate`) {
		t.Errorf("the report does not name the field: %s", s.stderr)
	}
	if got := rulesOf(); got != edited {
		t.Errorf("rules after a malformed edit: %s; want the last good %s", got, edited)
	}

	var stats map[string]int64
	if err := json.Unmarshal([]byte(fetch(t, s.url+"/-/stats", "").body), &stats); err != nil {
		t.Fatal(err)
	}
	if stats["allowed"] < 6 || stats["denied"] < 1 || stats["errors"] != 0 || stats["degraded"] != 0 {
		t.Errorf("stats %v", stats)
	}
	if code := s.stop(); code != 0 {
		t.Errorf("exit %d\n%s\n%s", code, s.stdout, s.stderr)
	}
	if !strings.Contains(s.stdout.String(), "stopped") {
		t.Errorf("no clean stop: %s", s.stdout)
	}
}

// TestServeRealRedisFile runs serve on a real redis-server with rules from
// a file, reloaded when the file changes.
func TestServeRealRedisFile(t *testing.T) {
	srv := redistest.StartServer(t)
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(demoRules), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "-redis", "redis://"+srv.Addr()+"/0", "-rules", path, "-interval", "50ms")
	if s.redis != "" {
		t.Errorf("embedded Redis started despite -redis")
	}
	wantLimited(t, burst(t, s.url+"/order.create", "demo", 4), demoPolicy)

	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Replace(demoRules, "{name: qpm, rate: 10, period: 1m}", "{name: qpm, rate: 20, period: 1m}", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the file edit", func() bool {
		var b bytes.Buffer
		_ = json.Compact(&b, []byte(fetch(t, s.url+"/-/rules", "").body))
		return strings.Contains(b.String(), `"rate":20`)
	})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	if n, err := rdb.Get(context.Background(), "limiter:{demo-order.create}:n=qpm").Int(); err != nil || n < 3 {
		t.Errorf("qpm counter after the reload: %d, %v; want the burst's count kept", n, err)
	}
}

// TestServeCleansItsHash: serve on a Redis it did not start seeds the
// rules hash and deletes it on exit; a hash that held rules before stays.
func TestServeCleansItsHash(t *testing.T) {
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	s := startServe(t, "-redis", "redis://"+srv.Addr()+"/0")
	if n, err := rdb.HLen(ctx, defaultHash).Result(); err != nil || n == 0 {
		t.Fatalf("the rules hash while serving: %d fields, %v", n, err)
	}
	if code := s.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if n, err := rdb.Exists(ctx, defaultHash).Result(); err != nil || n != 0 {
		t.Errorf("the hash serve wrote outlived it: %d, %v", n, err)
	}
	if err := rdb.HSet(ctx, defaultHash, "mine-x", `[{"name":"qps","rate":5,"period":"1s"}]`).Err(); err != nil {
		t.Fatal(err)
	}
	s = startServe(t, "-redis", "redis://"+srv.Addr()+"/0")
	if code := s.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if v, err := rdb.HGet(ctx, defaultHash, "mine-x").Result(); err != nil || v == "" {
		t.Errorf("a hash of the user's rules was touched: %q, %v", v, err)
	}
}

// TestServeRedisDown: with -fail-mode closed and Redis unreachable, a
// request gets 503 with Retry-After, promptly.
func TestServeRedisDown(t *testing.T) {
	dead := redistest.RefusedAddr(t)
	path := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(path, []byte(`{"default":[{"name":"qps","rate":5,"period":"1s"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for mode, want := range map[string]int{"closed": 503, "open": 200, "error": 503} {
		s := startServe(t, "-redis", "redis://"+dead, "-rules", path, "-fail-mode", mode)
		start := time.Now()
		r := fetch(t, s.url+"/x", "k")
		if r.status != want || time.Since(start) > 2*time.Second {
			t.Errorf("%s: %d after %s, want %d promptly", mode, r.status, time.Since(start), want)
		}
		if (mode == "closed") != (r.header.Get("Retry-After") == "1") || r.header.Get("RateLimit") != "" {
			t.Errorf("%s: Retry-After %q, RateLimit %q", mode, r.header.Get("Retry-After"), r.header.Get("RateLimit"))
		}
		var stats map[string]int64
		_ = json.Unmarshal([]byte(fetch(t, s.url+"/-/stats", "").body), &stats)
		if stats["errors"] != 1 || stats["degraded"] != map[string]int64{"closed": 1, "open": 1, "error": 0}[mode] {
			t.Errorf("%s: stats %v", mode, stats)
		}
		s.stop()
	}
}

func TestServeUsage(t *testing.T) {
	for _, args := range [][]string{{"serve", "extra"}, {"serve", "-fail-mode", "sometimes"}, {"serve", "-interval", "0s"}, {"serve", "-redis", "http://x"}} {
		if code, _, errOut := runCmd(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2 (%s)", args, code, errOut)
		}
	}
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("subjects: {a: [{rate: 0, period: 1s}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCmd(t, "serve", "-addr", "127.0.0.1:0", "-rules", path)
	if code != 1 || !strings.Contains(errOut, `subjects["a"][0].rate`) {
		t.Errorf("bad rules file: exit %d, %s", code, errOut)
	}
	// a -fail-mode the rules' own fail_mode would override without a word
	open := filepath.Join(t.TempDir(), "open.yaml")
	if err := os.WriteFile(open, []byte("fail_mode: open\nsubjects: {a: [{rate: 1, period: 1s}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCmd(t, "serve", "-addr", "127.0.0.1:0", "-rules", open, "-fail-mode", "closed")
	if code != 2 || !strings.Contains(errOut, "fail_mode: open") {
		t.Errorf("-fail-mode closed beside the rules' fail_mode: open: exit %d, %s; want 2, naming both", code, errOut)
	}
}

// TestServeAppKeyMethod: subjects are appkey and method joined by
// httplimit.Join("-"): ordinary ones read as "<appkey>-<method>" (the demo
// rules' names), and requests that differ in appkey or method never share
// a subject, nor its counters, even when a '-' moves between them.
func TestServeAppKeyMethod(t *testing.T) {
	subject := func(appkey, path string) string {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		if appkey != "" {
			r.Header.Set("X-App-Key", appkey)
		}
		s, err := appkeyMethod(r)
		if err != nil {
			t.Fatalf("appkeyMethod(%q, %q): %v", appkey, path, err)
		}
		return s
	}
	for _, c := range []struct{ appkey, path, want string }{
		{"demo", "/order.create", "demo-order.create"},
		{"", "/x", "ip-192.0.2.1-x"},
		{"192.0.2.1", "/x", "192.0.2.1-x"},
		{"demo", "/", "demo-index"},
		{"acme", "/order-create", "acme-order%2Dcreate"},
		{"acme-order", "/create", "acme%2Dorder-create"},
		{"50%", "/x", "50%25-x"},
	} {
		if got := subject(c.appkey, c.path); got != c.want {
			t.Errorf("subject of X-App-Key %q, path %q = %q; want %q", c.appkey, c.path, got, c.want)
		}
	}
	if a, b := subject("acme", "/order-create"), subject("acme-order", "/create"); a == b {
		t.Errorf(`X-App-Key "acme" /order-create and X-App-Key "acme-order" /create share the subject %q`, a)
	}
	if a, b := subject("", "/x"), subject("ip-192.0.2.1", "/x"); a == b {
		t.Errorf(`no X-App-Key from 192.0.2.1 and X-App-Key "ip-192.0.2.1" share the subject %q`, a)
	}

	// Served: two per day by default; each of the two requests has its own.
	path := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(path, []byte(`{"default":[{"name":"qpd","rate":2,"period":"1d"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "-rules", path)
	for i, want := range []int{200, 200, 429} {
		if r := fetch(t, s.url+"/order-create", "acme"); r.status != want || (want == 200 && r.body != "ok acme-order%2Dcreate\n") {
			t.Errorf("acme /order-create %d: %d %q, want %d", i, r.status, r.body, want)
		}
	}
	if r := fetch(t, s.url+"/create", "acme-order"); r.status != 200 || r.body != "ok acme%2Dorder-create\n" {
		t.Errorf("acme-order /create after acme /order-create's quota: %d %q, want 200 on its own subject", r.status, r.body)
	}
}

// TestServeHashDefaultOnly: a rules file with a default and no subjects
// seeds nothing into the hash, which serve then reads as empty, not as
// missing rules.
func TestServeHashDefaultOnly(t *testing.T) {
	srv := redistest.StartServer(t)
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte("default:\n  - {name: qps, rate: 5, period: 1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "-redis", "redis://"+srv.Addr()+"/0", "-rules", path, "-hash", "defaultOnly", "-interval", "50ms")
	if r := fetch(t, s.url+"/x", "k"); r.status != http.StatusOK {
		t.Errorf("first request: %d; want 200 under the default rules", r.status)
	}
}
