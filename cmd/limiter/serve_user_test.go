package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/quotagate/limiter/internal/redistest"
)

// TestServeStopsWithAnIdleConnection: serve's graceful stop (SIGTERM / the
// context ending, the same path) with one client connection open that has
// not sent a request yet (a browser's preconnect, a health checker's TCP
// probe): http.Server.Shutdown waits for it up to its 5 s timeout, then
// serve returns "context deadline exceeded": exit 1, no "stopped" line, and
// the connection is never force-closed (no srv.Close()).
func TestServeStopsWithAnIdleConnection(t *testing.T) {
	s := startServe(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	code := s.stop()
	if code != 0 || !strings.Contains(s.stdout.String(), "stopped") {
		t.Errorf("stop with an idle connection open: exit %d after %s; want 0 and a clean stop\nstdout: %s\nstderr: %s",
			code, time.Since(start).Round(time.Millisecond), s.stdout, s.stderr)
	}
}

// TestServeEditHintReachesTheRulesDatabase: with -redis redis://host:port/3 the
// printed "edit:" hint is `redis-cli -h host -p port HSET ...`, which writes
// to database 0; serve reads its rules hash from database 3, so the edit the
// hint suggests never takes effect (the same for a password or TLS in the
// URL: the hint has no -a/--user/--tls).
func TestServeEditHintReachesTheRulesDatabase(t *testing.T) {
	srv := redistest.StartServer(t)
	s := startServe(t, "-redis", "redis://"+srv.Addr()+"/3", "-interval", "50ms")
	m := regexp.MustCompile(`edit:\s+(redis-cli .*)`).FindStringSubmatch(s.stdout.String())
	if m == nil {
		t.Fatalf("no edit hint:\n%s", s.stdout)
	}
	hint := m[1]
	if _, err := exec.LookPath("redis-cli"); err != nil {
		if os.Getenv("REQUIRE_REDIS") != "" {
			t.Fatalf("REQUIRE_REDIS is set and redis-cli is missing: %v", err)
		}
		t.Skipf("redis-cli is not installed: %v", err)
	}
	out, err := exec.Command("sh", "-c", hint).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v %s", hint, err, out)
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if regexp.MustCompile(`"rate":\s*5\b`).MatchString(fetch(t, s.url+"/-/rules", "").body) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("the edit the hint prints (%s) never reached serve's rules (it wrote db 0; serve reads db 3):\n%s", hint, fetch(t, s.url+"/-/rules", "").body)
}

// TestServeStatusEndpointsOtherMethods: /-/rules and /-/stats are
// registered for GET only; any other method falls through to the limited
// demo handler, which answers 200 "ok demo-%2D/rules" (and counts against
// the subject's quota) instead of 405 Method Not Allowed.
func TestServeStatusEndpointsOtherMethods(t *testing.T) {
	s := startServe(t)
	req, _ := http.NewRequest(http.MethodPost, s.url+"/-/rules", nil)
	req.Header.Set("X-App-Key", "demo")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /-/rules: %d %q; want 405", resp.StatusCode, b)
	}
}

// TestServeStatsCountDefaultDenials: under rules whose default is
// deny, a request of an unknown subject gets 429, but /-/stats (fed by the
// limiter's observer only) reports denied 0: its "denied" misses every
// refusal the rule set's default makes.
func TestServeStatsCountDefaultDenials(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte("default: deny\nsubjects:\n  a-x:\n    - {name: qps, rate: 1, period: 1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "-rules", path)
	if r := fetch(t, s.url+"/x", "b"); r.status != http.StatusTooManyRequests {
		t.Fatalf("unknown subject under default deny: %d", r.status)
	}
	var stats map[string]int64
	if err := json.Unmarshal([]byte(fetch(t, s.url+"/-/stats", "").body), &stats); err != nil {
		t.Fatal(err)
	}
	if stats["denied"] != 1 {
		t.Errorf("after one 429, /-/stats = %v; want denied 1", stats)
	}
}

// TestServeStatsCountDefaultAdmissions: under rules whose default is
// allow, a request of an unknown subject is admitted without a limiter
// decision; /-/stats counts it (it counted default denials only).
func TestServeStatsCountDefaultAdmissions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte("default: allow\nsubjects:\n  a-x:\n    - {name: qps, rate: 1, period: 1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "-rules", path)
	for range 3 {
		if r := fetch(t, s.url+"/x", "b"); r.status != http.StatusOK {
			t.Fatalf("unknown subject under default allow: %d", r.status)
		}
	}
	var stats map[string]int64
	if err := json.Unmarshal([]byte(fetch(t, s.url+"/-/stats", "").body), &stats); err != nil {
		t.Fatal(err)
	}
	if stats["allowed"] != 3 || stats["denied"] != 0 {
		t.Errorf("after three 200s from the default, /-/stats = %v; want allowed 3, denied 0", stats)
	}
}

// TestServeReloadKeepsTheFailModeFlag: a rules file rewritten with a
// fail_mode other than -fail-mode's is refused on reload, as it is at
// start-up: the last good rules (and the flag's fail mode) stay, and the
// log says why. (It was applied without a word: -fail-mode open, and the
// requests got 503s once Redis was down.)
func TestServeReloadKeepsTheFailModeFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte("subjects:\n  a-x:\n    - {name: qps, rate: 1, period: 1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "-rules", path, "-fail-mode", "open", "-interval", "50ms")
	if err := os.WriteFile(path, []byte("fail_mode: closed\nsubjects:\n  a-x:\n    - {name: qps, rate: 100, period: 1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.stderr.String(), "reload failed") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if log := s.stderr.String(); !strings.Contains(log, "reload failed") || !strings.Contains(log, "fail_mode: closed, but -fail-mode is open") || strings.Contains(log, "rules reloaded") {
		t.Fatalf("rules rewritten with fail_mode: closed beside -fail-mode open: log\n%s\nwant the reload refused, naming both", log)
	}
	// the last good rules: 1 per second
	if a, b := fetch(t, s.url+"/x", "a"), fetch(t, s.url+"/x", "a"); a.status != http.StatusOK || b.status != http.StatusTooManyRequests {
		t.Errorf("after the refused reload: %d then %d; want 200 then 429 (rate 1/s, the last good rules)", a.status, b.status)
	}
}
