package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/quotagate/limiter/internal/redistest"
)

// TestServeDefaultFailMode: without -fail-mode, a request Redis cannot
// decide gets 503 (-fail-mode's documented default: error (503)), not
// admitted.
func TestServeDefaultFailMode(t *testing.T) {
	dead := redistest.RefusedAddr(t)
	path := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(path, []byte(`{"default":[{"name":"qps","rate":5,"period":"1s"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "-redis", "redis://"+dead, "-rules", path)
	if r := fetch(t, s.url+"/x", "k"); r.status != 503 {
		t.Errorf("Redis down, no -fail-mode: %d %q; want 503", r.status, r.body)
	}
}

// TestServeStatusEndpointsHeaders: /-/rules and /-/stats answer JSON
// with its Content-Type, HEAD as GET, and other methods 405 with an Allow
// header naming both GET and HEAD.
func TestServeStatusEndpointsHeaders(t *testing.T) {
	s := startServe(t)
	for _, p := range []string{"/-/rules", "/-/stats"} {
		if r := fetch(t, s.url+p, ""); r.status != 200 || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("GET %s: %d, Content-Type %q; want 200 application/json", p, r.status, r.header.Get("Content-Type"))
		}
		for _, m := range []string{http.MethodHead} {
			req, _ := http.NewRequest(m, s.url+p, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("%s %s: %d; want 200", m, p, resp.StatusCode)
			}
		}
		req, _ := http.NewRequest(http.MethodPost, s.url+p, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("POST %s: %d, Allow %q; want 405, Allow \"GET, HEAD\"", p, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
}

// TestServeRulesShowFailMode: GET /-/rules shows the rules in force,
// their fail_mode included.
func TestServeRulesShowFailMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte("fail_mode: open\nsubjects: {a-x: [{name: qps, rate: 1, period: 1s}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "-rules", path)
	var got map[string]any
	if err := json.Unmarshal([]byte(fetch(t, s.url+"/-/rules", "").body), &got); err != nil || got["fail_mode"] != "open" {
		t.Errorf("/-/rules: %v, %v; want fail_mode open", got, err)
	}
}
