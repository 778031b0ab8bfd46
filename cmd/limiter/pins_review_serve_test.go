package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/rules"
)

// TestServeStatsDefaultLimitsCountedOnce: a subject decided by the
// default's limits (not the default's bare allow/deny) is a limiter decision
// the observer counts: /-/stats must count it once, not twice.
func TestServeStatsDefaultLimitsCountedOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte("default:\n  - {name: qph, rate: 1, period: 1h}\nsubjects:\n  a-x:\n    - {name: qps, rate: 1, period: 1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "-rules", path)
	if r := fetch(t, s.url+"/x", "b"); r.status != http.StatusOK {
		t.Fatalf("first request under the default's 1/h: %d", r.status)
	}
	if r := fetch(t, s.url+"/x", "b"); r.status != http.StatusTooManyRequests {
		t.Fatalf("second request under the default's 1/h: %d", r.status)
	}
	var stats map[string]int64
	if err := json.Unmarshal([]byte(fetch(t, s.url+"/-/stats", "").body), &stats); err != nil {
		t.Fatal(err)
	}
	if stats["allowed"] != 1 || stats["denied"] != 1 {
		t.Errorf("after one 200 and one 429 from the default's limits, /-/stats = %v; want allowed 1, denied 1", stats)
	}
}

// TestSetJSONDefaultDeny: /-/rules shows a bare default as its action
// ("deny", "allow"), not as an empty list of limits.
func TestSetJSONDefaultDeny(t *testing.T) {
	for _, action := range []string{"deny", "allow"} {
		set, err := rules.ParseYAML([]byte("default: " + action + "\nsubjects:\n  a-x:\n    - {name: qps, rate: 1, period: 1s}\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got := setJSON(set)["default"]; got != action {
			t.Errorf("setJSON(default %s)[default] = %v (%T); want %q", action, got, got, action)
		}
	}
}

// TestRedisCLIMore: the edit hint names database 1, and TLS without a
// password.
func TestRedisCLIMore(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"redis://127.0.0.1:6390/1", "redis-cli -h 127.0.0.1 -p 6390 -n 1"},
		{"rediss://cache.example:6380", "redis-cli -h cache.example -p 6380 --tls"},
		{"unix:///run/redis:6379.sock", "redis-cli -s /run/redis:6379.sock"},
	} {
		opt, err := redis.ParseURL(tc.url)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		if got := redisCLI(opt); got != tc.want {
			t.Errorf("redisCLI(%s) = %q; want %q", tc.url, got, tc.want)
		}
	}
}
