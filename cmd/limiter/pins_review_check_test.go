package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/internal/redistest"
)

// TestCaughtControlIsVerification: a run whose rows are a known-bad
// control caught as expected and skips verified something: it exits 0,
// and does not say "nothing was verified".
func TestCaughtControlIsVerification(t *testing.T) {
	caught := row{adapter: "goredis", expected: true, Outcome: conformance.Outcome{Spec: "GetThenIncr", Check: "exact-admission", ID: 1,
		Messages: []string{"property 1: 12 admitted under a limit of 10"}}}
	skip := row{adapter: "goredis", Outcome: skipped("FixedWindow", "exact-admission", 1, "cannot run here")}
	rows := []row{caught, skip}
	var table bytes.Buffer
	if code := report(&table, rows, false, time.Second); code != 0 || strings.Contains(table.String(), "nothing was verified") {
		t.Errorf("table exit %d; want 0\n%s", code, table.String())
	}
	var js bytes.Buffer
	if code, err := reportJSON(&js, "test", rows, time.Second, len(rows), false); code != 0 || err != nil {
		t.Errorf("-json exit %d (%v); want 0\n%s", code, err, js.String())
	}
}

// TestClusterNodesMixSchemes: -cluster nodes given as redis:// and
// rediss:// disagree on TLS: a usage error, not the last node's scheme for
// all of them.
func TestClusterNodesMixSchemes(t *testing.T) {
	for _, list := range []string{"redis://127.0.0.1:7000,rediss://127.0.0.1:7001", "rediss://127.0.0.1:7000,redis://127.0.0.1:7001"} {
		if _, _, err := parseClusterNodes(list); err == nil || !strings.Contains(err.Error(), "different users, passwords or schemes") {
			t.Errorf("parseClusterNodes(%q) = %v; want the nodes' disagreement", list, err)
		}
	}
}

// TestPortZero: port 0 is no port one can dial: a usage error for
// -redis and -cluster.
func TestPortZero(t *testing.T) {
	if _, err := parseURL("-redis", "redis://127.0.0.1:0"); err == nil {
		t.Errorf("parseURL(redis://127.0.0.1:0): no error")
	}
	if isHostPort("127.0.0.1:0") {
		t.Errorf("isHostPort(127.0.0.1:0) = true")
	}
}

// TestClusterHostPortWithTLSOptions: -cluster nodes given as host:port
// with a -tls-* option are reached over TLS (the options turn it on): the
// node is reached and found no Cluster node, not a usage error asking for
// a rediss:// URL.
func TestClusterHostPortWithTLSOptions(t *testing.T) {
	s := redistest.StartTLSServer(t)
	code, out, errOut := runCmd(t, "check", "-cluster", s.Addr(), "-tls-ca", s.TLS().CAFile, "-checks", "replies-normalised")
	if code != 1 || !strings.Contains(errOut, "no Redis Cluster node") || strings.Contains(out+errOut, "rediss://") && strings.Contains(out+errOut, "need") {
		t.Errorf("-cluster %s -tls-ca: exit %d; want 1, the node reached over TLS and found no Cluster\nstdout:\n%s\nstderr:\n%s", s.Addr(), code, out, errOut)
	}
}
