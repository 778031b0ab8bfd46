package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestCheckFlagErrors: flag combinations the usage and doc.go exclude
// are usage errors (exit 2) naming what is wrong, before any dial.
func TestCheckFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "-redis", "redis://127.0.0.1:1", "-cluster", "127.0.0.1:2"}, "-redis and -cluster exclude each other"},
		{[]string{"check", "-cluster", "redis://127.0.0.1:1/3"}, "a Cluster has only database 0"},
		{[]string{"check", "-cluster", "redis://u:a@127.0.0.1:1,redis://u:b@127.0.0.1:2"}, "give different users, passwords or schemes"},
		{[]string{"check", "-redis", "rediss://127.0.0.1:1", "-tls-cert", "x.pem"}, "-tls-cert and -tls-key go together"},
		{[]string{"check", "-tls-insecure", "-checks", "weighted-costs"}, "the -tls options need -redis rediss://... or -cluster"},
	} {
		code, out, errOut := runCmd(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) || strings.Contains(out, "STRATEGY") {
			t.Errorf("%q: exit %d, stderr %q; want 2 saying %q", c.args, code, errOut, c.want)
		}
	}
}

// TestSelectChecks: -checks takes names with spaces after the commas,
// and a name given twice selects its check once.
func TestSelectChecks(t *testing.T) {
	sel, err := selectChecks("weighted-costs, hostile-costs,weighted-costs")
	if err != nil || len(sel.checks) != 2 {
		t.Errorf("selectChecks: %d checks, %v; want weighted-costs and hostile-costs once each", len(sel.checks), err)
	}
	sel, err = selectChecks("integer-scripts,integer-scripts")
	if err != nil || len(sel.store) != 1 {
		t.Errorf("selectChecks: %d store checks, %v; want integer-scripts once", len(sel.store), err)
	}
}

// TestServeAddrDefault: serve listens on the loopback by default (a
// demo service, not for the network).
func TestServeAddrDefault(t *testing.T) {
	code, _, errOut := runCmd(t, "serve", "-h")
	if code != 0 || !strings.Contains(errOut, `(default "127.0.0.1:8080")`) {
		t.Errorf("serve -h: exit %d; want the -addr default 127.0.0.1:8080\n%s", code, errOut)
	}
}

// TestServerFlagsNameAServer: an empty -redis or -cluster (an unset shell
// variable) and a port no dial can reach are usage errors (exit 2) before
// any dial, not a run on the embedded miniredis (exit 0, a report on no
// server of the user's) nor a connection failure (exit 1, as if the
// server were down); the password stays masked.
func TestServerFlagsNameAServer(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "-redis", "", "-checks", "weighted-costs"}, "-redis is empty"},
		{[]string{"check", "-cluster", " ", "-checks", "weighted-costs"}, "-cluster is empty"},
		{[]string{"bench", "-redis", "", "-rounds", "1"}, "-redis is empty"},
		{[]string{"serve", "-redis", "", "-addr", "127.0.0.1:0"}, "-redis is empty"},
		{[]string{"check", "-redis", "redis://u:secret@127.0.0.1:99999"}, "redis://u:xxxxx@127.0.0.1:99999: the port must be 1 to 65535"},
		{[]string{"check", "-redis", "redis://127.0.0.1:0"}, "the port must be 1 to 65535"},
		{[]string{"bench", "-redis", "redis://127.0.0.1:65536"}, "the port must be 1 to 65535"},
		{[]string{"serve", "-redis", "redis://127.0.0.1:99999"}, "the port must be 1 to 65535"},
		{[]string{"check", "-cluster", "redis://127.0.0.1:70000"}, "the port must be 1 to 65535"},
		{[]string{"check", "-cluster", "127.0.0.1:7000,127.0.0.1:0"}, "127.0.0.1:0 is neither host:port nor a URL"},
	} {
		// (a serve that took the flag for none would serve until ended)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var stdout, stderr bytes.Buffer
		code := run(ctx, c.args, &stdout, &stderr)
		cancel()
		out, errOut := stdout.String(), stderr.String()
		if code != 2 || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "secret") || strings.Contains(out, "STRATEGY") || strings.Contains(out, "miniredis") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 saying %q", c.args, code, out, errOut, c.want)
		}
	}
}
