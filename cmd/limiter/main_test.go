package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/internal/redistest"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestCheckDefault runs the quick start's command: the whole matrix on the
// embedded miniredis, with the known-bad controls.
func TestCheckDefault(t *testing.T) {
	code, out, errOut := runCmd(t, "check", "-known-bad")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"FixedWindow     goredis  ",
		"P01 exact-admission",
		"P19 lost-reply-counted-once",
		"GetThenIncr",
		"FAIL (expected)",
		wantSummary(),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "PASS (must fail)") {
		t.Errorf("a known-bad control passed:\n%s", out)
	}
}

// wantSummary is the summary line of a clean run with -known-bad.
func wantSummary() string {
	checks := len(conformance.Checks())*len(conformance.Strategies())*len(adapters()) + len(conformance.StoreChecks())*len(adapters())
	caught := 0
	for _, ctl := range conformance.KnownBad() {
		caught += len(ctl.MustFail) * len(adapters())
	}
	return fmt.Sprintf("%d passed, 0 failed, 0 skipped; %d known-bad failures caught as expected", checks, caught)
}

func TestCheckUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"nope"}, {"check", "-checks", "no-such-check"}, {"check", "-redis", "http://x"}, {"check", "extra"}} {
		if code, _, _ := runCmd(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

// TestCheckOnRedisURL runs selected checks on a real server given by URL:
// a shared server, so the suite skips what would flush or restart it and
// leaves no keys behind.
func TestCheckOnRedisURL(t *testing.T) {
	s := redistest.StartServer(t)
	code, out, errOut := runCmd(t, "check", "-redis", "redis://"+s.Addr()+"/0",
		"-checks", "exact-admission,noscript-invisible,lost-reply-counted-once,short-and-long-windows")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "3 passed, 0 failed, 1 skipped") || !strings.Contains(out, "P16 noscript-invisible       skip") {
		t.Errorf("unexpected report:\n%s", out)
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer rdb.Close()
	keys, err := rdb.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("the suite left %d keys on a shared server: %q", len(keys), keys)
	}
}

// TestCheckOnCluster runs selected checks on a real cluster given by
// -cluster: keys are checked against the server's CLUSTER KEYSLOT.
func TestCheckOnCluster(t *testing.T) {
	c := redistest.StartCluster(t)
	code, out, errOut := runCmd(t, "check", "-cluster", strings.Join(c.Addrs(), ","),
		"-checks", "exact-admission,multi-rule-all-or-nothing,same-slot-for-hostile-subjects,lost-reply-counted-once")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "cluster at ") || !strings.Contains(out, "3 passed, 0 failed, 1 skipped") {
		t.Errorf("unexpected report:\n%s", out)
	}
}
