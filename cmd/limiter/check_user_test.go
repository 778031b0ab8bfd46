package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/redistest"
)

// TestCheckClusterGivenOneNode: `check -cluster` given one node of a
// Cluster scans every master for the checks' keys (read from CLUSTER
// NODES). Given one master of three it scanned that one only: the leak
// checks passed on keys they never saw, the controls that must fail them
// passed, and 15 keys without a TTL stayed in the Cluster.
func TestCheckClusterGivenOneNode(t *testing.T) {
	c := redistest.StartCluster(t)
	addrs := c.Addrs()
	code, out, errOut := runCmd(t, "check", "-cluster", addrs[0], "-known-bad", "-checks", "forced-leak")
	if code != 0 || strings.Contains(out, "PASS (must fail)") {
		t.Errorf("exit %d; want 0 with every control caught\n%s\n%s", code, out, errOut)
	}
	ctx := context.Background()
	total, immortal := 0, 0
	var sample []string
	for _, a := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: a})
		keys, err := rdb.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			total++
			if ttl, _ := rdb.PTTL(ctx, k).Result(); ttl < 0 {
				immortal++
				if len(sample) < 5 {
					sample = append(sample, a+" "+k)
				}
			}
		}
		_ = rdb.Close()
	}
	if total != 0 {
		t.Errorf("check -cluster %s (one of %d masters) left %d keys in the Cluster, %d without a TTL, e.g. %q", addrs[0], len(addrs), total, immortal, sample)
	}
}

// TestCheckNothingVerified: a run in which every selected check skipped
// verified nothing: it says so and exits 1, not 0 as a pass would.
func TestCheckNothingVerified(t *testing.T) {
	s := redistest.StartServer(t)
	code, out, errOut := runCmd(t, "check", "-redis", "redis://"+s.Addr(), "-checks", "server-conditions")
	if code != 1 || !strings.Contains(out, "0 passed, 0 failed") || !strings.Contains(out, "nothing was verified") {
		t.Errorf("exit %d; want 1 saying nothing was verified\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "check", "-redis", "redis://"+s.Addr(), "-checks", "server-conditions", "-json")
	if code != 1 {
		t.Errorf("-json: exit %d; want 1\n%s\n%s", code, out, errOut)
	}
}

// TestCheckNeedsPassword: on a server that requires a password, check
// without one says that it cannot use the server (NOAUTH) and exits 1 before
// any check runs, as for a wrong password; it read every NOAUTH as a
// refusal ("scripts refused") and ran the whole matrix, failing it.
func TestCheckNeedsPassword(t *testing.T) {
	s := redistest.StartServer(t, "--requirepass", "s3cret")
	code, out, errOut := runCmd(t, "check", "-redis", "redis://"+s.Addr(), "-checks", "weighted-costs")
	if code != 1 || !strings.Contains(errOut, "cannot use the server") || !strings.Contains(errOut, "NOAUTH") || strings.Contains(out, "STRATEGY") {
		t.Errorf("exit %d; want 1 with \"cannot use the server\" (NOAUTH) before any check runs\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "check", "-redis", "redis://:s3cret@"+s.Addr(), "-checks", "weighted-costs")
	if code != 0 {
		t.Errorf("with the password: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestCheckClusterOnSingleServer: -cluster given a server that is no
// Cluster node says so and exits 1 before any check runs (it reported the
// server, then failed every check on CLUSTER NODES).
func TestCheckClusterOnSingleServer(t *testing.T) {
	s := redistest.StartServer(t)
	code, out, errOut := runCmd(t, "check", "-cluster", s.Addr(), "-checks", "weighted-costs")
	if code != 1 || !strings.Contains(errOut, "cannot use the server") || !strings.Contains(errOut, "no Redis Cluster node") || strings.Contains(out, "STRATEGY") {
		t.Errorf("exit %d; want 1 with \"cannot use the server\" (no Redis Cluster node) before any check runs\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// TestCheckClusterOverTLSVerifiesEachNode: with -cluster rediss:// nodes of
// other hosts, each node's certificate is checked against its own host
// (here a single TLS server, whose certificate names 127.0.0.1: check
// reaches it and finds no Cluster). Every node's was checked against the
// last URL's host: "x509: certificate is valid for localhost, not
// other.invalid" for 127.0.0.1.
func TestCheckClusterOverTLSVerifiesEachNode(t *testing.T) {
	s := redistest.StartTLSServer(t)
	code, out, errOut := runCmd(t, "check", "-cluster", "rediss://"+s.Addr()+",rediss://other.invalid:1", "-tls-ca", s.TLS().CAFile, "-checks", "replies-normalised")
	if code != 1 || !strings.Contains(errOut, "no Redis Cluster node") || strings.Contains(out+errOut, "certificate") {
		t.Errorf("-cluster rediss://%s,rediss://other.invalid:1: exit %d; want 1, the first node reached over TLS and found no Cluster\nstdout:\n%s\nstderr:\n%s", s.Addr(), code, out, errOut)
	}
}

// TestCheckClusterWithPassword: a Cluster whose nodes need a password is
// reached with its nodes given as redis://:password@host:port; given bare,
// check says that a password is needed (it said "no Redis Cluster node",
// pointing to -redis), and nodes that disagree on credentials are a usage
// error.
func TestCheckClusterWithPassword(t *testing.T) {
	c := redistest.StartCluster(t)
	addrs := c.Addrs()
	ctx := context.Background()
	for _, a := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: a})
		for _, kv := range [][2]string{{"masterauth", "cpw"}, {"requirepass", "cpw"}} {
			if err := rdb.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
				t.Fatalf("%s: CONFIG SET %s: %v", a, kv[0], err)
			}
		}
		_ = rdb.Close()
	}
	code, out, errOut := runCmd(t, "check", "-cluster", addrs[0], "-checks", "weighted-costs")
	if code != 1 || !strings.Contains(errOut, "needs a password") || !strings.Contains(errOut, "redis://user:password@"+addrs[0]) || strings.Contains(errOut, "no Redis Cluster node") {
		t.Errorf("-cluster %s without the password: exit %d; want 1, saying a password is needed and how to give it\nstdout:\n%s\nstderr:\n%s", addrs[0], code, out, errOut)
	}
	code, out, errOut = runCmd(t, "check", "-cluster", "redis://:cpw@"+addrs[0], "-checks", "weighted-costs")
	if code != 0 || !strings.Contains(out, "cluster at "+addrs[0]) || !strings.Contains(out, "passed, 0 failed") {
		t.Errorf("-cluster redis://:cpw@%s: exit %d; want 0, every check run on the Cluster\nstdout:\n%s\nstderr:\n%s", addrs[0], code, out, errOut)
	}
	code, _, errOut = runCmd(t, "check", "-cluster", "redis://:cpw@"+addrs[0]+",redis://:other@"+addrs[1], "-checks", "weighted-costs")
	if code != 2 || !strings.Contains(errOut, "different users, passwords or schemes") {
		t.Errorf("-cluster with two passwords: exit %d; want 2 (usage)\nstderr:\n%s", code, errOut)
	}
}

// TestCheckSkipsStrategiesThatCannotRunThere: on a server whose user may
// not run scripts, the strategies that need them skip, each row saying
// why, and the ones that can run there (Bucketed, Optimistic) are
// checked: exit 0. (Every scripted strategy's checks failed with NOPERM,
// exit 1, after the report had said they cannot run there.)
func TestCheckSkipsStrategiesThatCannotRunThere(t *testing.T) {
	s := serverWithUser(t, "noscript", "nspw", "-@scripting")
	code, out, errOut := runCmd(t, "check", "-redis", "redis://noscript:nspw@"+s.Addr(), "-checks", "weighted-costs")
	if code != 0 || !strings.Contains(out, "strategies here: Bucketed, Optimistic") || !regexp.MustCompile(`FixedWindow +goredis +P02 weighted-costs +skip .*cannot run here: it needs scripts, which the server refuses`).MatchString(out) || strings.Contains(out, "FAIL") {
		t.Errorf("check on a server without scripts: exit %d; want 0, the scripted strategies skipped with the reason\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"Bucketed", "Optimistic"} {
		if !strings.Contains(out, want) || strings.Count(out, "pass") < 2 {
			t.Errorf("check on a server without scripts: %s not checked\nstdout:\n%s", want, out)
		}
	}

	// The store checks that run scripts skip too, and so do the known-bad
	// controls' checks that need them: a control that failed only because
	// the server refused its scripts (NOPERM) was reported as having shown
	// its bug, and the script store checks failed, exit 1. Those that can
	// run there do, and fail as they must.
	code, out, errOut = runCmd(t, "check", "-redis", "redis://noscript:nspw@"+s.Addr(), "-known-bad", "-v",
		"-checks", "replies-normalised,scripts-and-noscript,batch-per-command,same-slot-for-hostile-subjects")
	if table := out[strings.Index(out, "STRATEGY"):]; code != 0 || strings.Contains(table, "NOPERM") { // (the header names it)
		t.Errorf("check -known-bad on a server without scripts: exit %d; want 0, no check failing for NOPERM\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		`store +goredis +scripts-and-noscript +skip .*cannot run here: it needs scripts`,
		`store +redigo +batch-per-command +skip .*cannot run here: it needs scripts`,
		`store +rueidis +replies-normalised +pass`,
		`UntaggedKeys +goredis +P22 same-slot-for-hostile-subjects +skip .*cannot run here: it needs scripts`,
		`store +goredis\+Unmapped +scripts-and-noscript +skip`,
		`store +goredis\+Unmapped +replies-normalised +FAIL \(expected\)`,
		`Bucketed +rueidis +P22 same-slot-for-hostile-subjects +pass`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("check -known-bad on a server without scripts: no row %q\nstdout:\n%s", want, out)
		}
	}
}

// TestCheckAndBenchOverAUnixSocket: -redis unix:///path?db=N runs every
// adapter over the socket, the fault-proxy checks too, in database N, and
// the report names the database. The URL was accepted, then rueidis and
// redigo dialed the path over TCP and the proxy too, which made every
// check of theirs and every fault check fail, and bench stopped at its
// second adapter.
func TestCheckAndBenchOverAUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "redis.sock")
	s := redistest.StartServer(t, "--unixsocket", sock, "--unixsocketperm", "700")
	url := "unix://" + sock + "?db=2"
	code, out, errOut := runCmd(t, "check", "-redis", url, "-checks", "weighted-costs,lost-reply-counted-once")
	if code != 0 || !strings.Contains(out, "database 2") || !regexp.MustCompile(`\b(\d+) passed, 0 failed, 0 skipped`).MatchString(out) {
		t.Errorf("check -redis %s: exit %d; want 0, every check passed, the report naming database 2\nstdout:\n%s\nstderr:\n%s", url, code, out, errOut)
	}
	for _, a := range []string{"goredis", "rueidis", "redigo"} {
		if !regexp.MustCompile(`(?m)^FixedWindow\s+` + a + `\s+P\d+ lost-reply-counted-once\s+pass`).MatchString(out) {
			t.Errorf("check over the socket: no passing lost-reply-counted-once row for %s\n%s", a, out)
		}
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), DB: 2})
	defer rdb.Close()
	code, out, errOut = runCmd(t, "bench", "-redis", url, "-allocs", "50", "-callers", "1", "-rounds", "1", "-round", "20ms")
	if code != 0 || strings.Count(out, "fixedwindow") != 3 || !strings.Contains(out, "database 2") {
		t.Errorf("bench -redis %s: exit %d; want 0 with a row per adapter\nstdout:\n%s\nstderr:\n%s", url, code, out, errOut)
	}
	if n, err := rdb.DBSize(context.Background()).Result(); err != nil || n != 0 {
		t.Errorf("database 2 after check and bench: %d keys (%v); want none left", n, err)
	}
}

// serverWithUser starts a redis-server with an ACL user of password pw,
// on, every key and every command but as rules take away.
func serverWithUser(t *testing.T, user, pw string, rules ...string) *redistest.Server {
	t.Helper()
	s := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer rdb.Close()
	args := []any{"ACL", "SETUSER", user, "on", ">" + pw, "~*", "+@all"}
	for _, r := range rules {
		args = append(args, r)
	}
	if err := rdb.Do(context.Background(), args...).Err(); err != nil {
		t.Fatal(err)
	}
	return s
}
