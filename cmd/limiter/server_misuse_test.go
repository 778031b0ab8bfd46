package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quotagate/limiter/internal/redistest"
)

// TestURLPasswordNotPrinted: a -redis or -cluster URL that does not parse
// is a usage error (exit 2) that names the flag and what is wrong, but not
// the URL's password (the parser's own error quotes the whole URL), in
// each command: neither for a bad port, nor for a password whose own
// characters make the URL fail to parse (not percent-encoded: "/", "?" and
// "#" end the host part, and the quoting escapes '"' and '\').
func TestURLPasswordNotPrinted(t *testing.T) {
	commands := func(url string) [][]string {
		return [][]string{
			{"check", "-redis", url + "/0"},
			{"check", "-cluster", url},
			{"bench", "-redis", url},
			{"serve", "-addr", "127.0.0.1:0", "-redis", url},
		}
	}
	for _, c := range []struct{ url, why string }{
		{"redis://u:s3cretpw@127.0.0.1:x", `redis://u:xxxxx@127.0.0.1:x`},
		{"redis://u:s3cr/etpw@127.0.0.1:6390", "cannot parse redis://u:xxxxx@127.0.0.1:6390"},
		{"redis://u:s3cr?etpw@127.0.0.1:6390", "cannot parse redis://u:xxxxx@127.0.0.1:6390"},
		{"redis://u:s3cr#etpw@127.0.0.1:6390", "cannot parse redis://u:xxxxx@127.0.0.1:6390"},
		{`redis://u:s3cr"etpw@127.0.0.1:6390`, "cannot parse redis://u:xxxxx@127.0.0.1:6390"},
		{`redis://u:s3cr\etpw@127.0.0.1:6390`, "cannot parse redis://u:xxxxx@127.0.0.1:6390"},
		{"redis://s3cr/etpw@127.0.0.1:6390", "cannot parse redis://xxxxx@127.0.0.1:6390"},
		// a scheme mistyped or left out: no "://" to find the user by
		{"//u:s3cretpw@127.0.0.1:x", "xxxxx@127.0.0.1:x"},
		{"redis:/u:s3cretpw@127.0.0.1:x", "xxxxx@127.0.0.1:x"},
		{"redis:u:s3cr/etpw@127.0.0.1:6390", "xxxxx@127.0.0.1:6390"},
		{"u:s3cretpw@127.0.0.1:6390", "xxxxx@127.0.0.1:6390"},
	} {
		for _, args := range commands(c.url) {
			code, out, errOut := runCmd(t, args...)
			if code != 2 || !strings.Contains(errOut, args[len(args)-2]+": ") || !strings.Contains(errOut, c.why) {
				t.Errorf("%q: exit %d, stderr %q; want 2 and a usage error naming the flag and saying %q", args, code, errOut, c.why)
			}
			if strings.Contains(out+errOut, "etpw") {
				t.Errorf("%q: the password (or its end) is printed: %s", args, strings.TrimSpace(out+errOut))
			}
		}
	}
}

// TestClusterNodeNeitherHostPortNorURL: a -cluster node without "://"
// must be host:port; anything else is a usage error, not an address to
// dial (one with a "/" was dialled as a Unix socket, its text printed in
// the dial error).
func TestClusterNodeNeitherHostPortNorURL(t *testing.T) {
	for _, n := range []string{"127.0.0.1", "127.0.0.1:99999", "127.0.0.1:x", ":7000", "/tmp/redis.sock", "h/x:7000"} {
		code, out, errOut := runCmd(t, "check", "-cluster", "127.0.0.1:7000,"+n)
		if code != 2 || !strings.Contains(errOut, n+" is neither host:port nor a URL") || strings.Contains(out, "STRATEGY") {
			t.Errorf("-cluster node %q: exit %d, stderr %q; want a usage error naming it", n, code, errOut)
		}
	}
}

// TestCheckRedisOnClusterNode: -redis naming a Cluster node ends before
// any check (exit 1), pointing at -cluster, instead of failing every
// strategy with MOVED through single-server clients.
func TestCheckRedisOnClusterNode(t *testing.T) {
	c := redistest.StartCluster(t)
	code, out, errOut := runCmd(t, "check", "-redis", "redis://"+c.Addrs()[0], "-checks", "weighted-costs")
	if code != 1 || !strings.Contains(errOut, "a Redis Cluster node: give its nodes with -cluster") || strings.Contains(out, "STRATEGY") {
		t.Errorf("-redis on a Cluster node: exit %d; want 1, no matrix, and an error pointing at -cluster\n%s\n%s", code, out, errOut)
	}
}

// TestCheckOnReplica: -redis naming a replica ends before any check (exit
// 1), its report warning that the server is a replica of its primary,
// instead of failing every strategy with READONLY (which go-redis's
// retries made look like a machine too busy).
func TestCheckOnReplica(t *testing.T) {
	primary := redistest.StartServer(t)
	host, port, _ := net.SplitHostPort(primary.Addr())
	replica := redistest.StartServer(t, "--replicaof", host, port)
	code, out, errOut := runCmd(t, "check", "-redis", "redis://"+replica.Addr(), "-checks", "weighted-costs")
	if code != 1 || !strings.Contains(errOut, "a replica: run the checks against its primary") || strings.Contains(out, "STRATEGY") {
		t.Errorf("-redis on a replica: exit %d; want 1, no matrix, and an error naming the replica\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{", slave, ", "warning: this server is a replica of " + host + ":" + port} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}

// TestCheckReportWithoutInfo: for a user whose ACL refuses INFO, the
// server line says that its version, mode and maxmemory are unknown
// (rather than "Redis , , maxmemory 0", which reads as no memory limit),
// the warning says why, and the checks run.
func TestCheckReportWithoutInfo(t *testing.T) {
	s := serverWithUser(t, "app", "apppw", "-@dangerous")
	code, out, errOut := runCmd(t, "check", "-redis", "redis://app:apppw@"+s.Addr()+"/0", "-checks", "hostile-costs")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"\nserver: Redis of unknown version, mode and maxmemory (INFO refused), scripts allowed\n", "warning: INFO is refused"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}

// TestServeTLSIdleTimeout: serve -redis rediss://... on a server that
// closes idle connections after a second: a request after the server
// closed the pooled connection is decided (200), not failed as an unknown
// outcome (503): the connection is dialled through goredis.TLSDialer,
// which notices the close.
func TestServeTLSIdleTimeout(t *testing.T) {
	s := redistest.StartTLSServer(t, "--timeout", "1")
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte("default:\n  - {name: qps, rate: 100, period: 1s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, "-redis", "rediss://"+s.Addr()+"/0?skip_verify=true", "-rules", path)
	if r := fetch(t, srv.url+"/x", "k"); r.status != http.StatusOK {
		t.Fatalf("first request: %d %q", r.status, r.body)
	}
	time.Sleep(2500 * time.Millisecond) // the server closes the idle connection
	for i := range 3 {
		if r := fetch(t, srv.url+"/x", "k"); r.status != http.StatusOK {
			t.Errorf("request %d after the server's idle timeout: %d %q; want 200", i, r.status, r.body)
		}
	}
}
