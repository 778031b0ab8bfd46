package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

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

// TestCheckKnownBad runs the matrix on the embedded miniredis with the
// known-bad controls, on a few checks (CI runs the whole default matrix with
// `go run ./cmd/limiter check -known-bad`): every strategy passes, every
// control fails the selected checks it must fail, and the summary adds up.
func TestCheckKnownBad(t *testing.T) {
	names := []string{"multi-rule-all-or-nothing", "forced-leak", "lost-reply-counted-once", "same-slot-for-hostile-subjects"}
	code, out, errOut := runCmd(t, "check", "-known-bad", "-checks", strings.Join(names, ","))
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"FixedWindow", "Bucketed", "Optimistic", "goredis", "rueidis", "redigo",
		"P04 multi-rule-all-or-nothing", "GetThenIncr", "UntaggedKeys", "FAIL (expected)", wantSummary(names)} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "PASS (must fail)") {
		t.Errorf("a known-bad control passed:\n%s", out)
	}
}

// wantSummary is the summary line of a clean run of the named checks with
// -known-bad.
func wantSummary(names []string) string {
	cells := strategyCells()
	caught := 0
	for _, ctl := range conformance.KnownBad() {
		for _, m := range ctl.MustFail {
			if slices.Contains(names, m) {
				caught += len(adapters())
			}
		}
	}
	return fmt.Sprintf("%d passed, 0 failed, 0 skipped; %d known-bad failures caught as expected", len(names)*cells, caught)
}

// TestCheckSelectsStoreChecks: -checks takes the store contract's checks
// too, and with -known-bad runs only the controls that must fail a
// selected check, each on the selected checks alone (ArrayInts also must
// fail exact-admission, and ServerErrorsUnknown scripts-and-noscript,
// which are not selected).
func TestCheckSelectsStoreChecks(t *testing.T) {
	names := []string{"integer-scripts", "batch-per-command"}
	code, out, errOut := runCmd(t, "check", "-known-bad", "-checks", strings.Join(names, ","))
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	caught := 0
	for _, ctl := range conformance.KnownBad() {
		for _, m := range ctl.MustFail {
			if slices.Contains(names, m) {
				caught += len(adapters())
			}
		}
	}
	if caught != 11*len(adapters()) {
		t.Errorf("%d control rows must fail the selected checks, want 11 per adapter: the controls changed, update the test", caught)
	}
	summary := fmt.Sprintf("%d passed, 0 failed, 0 skipped; %d known-bad failures caught as expected", len(names)*len(adapters()), caught)
	for _, want := range []string{"integer-scripts", "batch-per-command", "ArrayInts", "LaxInts", "FirstErrorFailsBatch", "UnmappedBatch", summary} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, unwanted := range []string{"exact-admission", "replies-normalised", "GetThenIncr", "Bucketed"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("output has %q, which was not selected:\n%s", unwanted, out)
		}
	}
	if !strings.Contains(errOut, fmt.Sprintf("running %d checks", len(names)*len(adapters())+caught)) {
		t.Errorf("the progress line does not count the rows the run reports:\n%s", errOut)
	}
}

func TestCheckUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"nope"}, {"check", "-checks", "no-such-check"}, {"check", "-redis", "http://x"}, {"check", "extra"}, {"check", "-cluster", "unix:///tmp/redis.sock"}} {
		if code, _, _ := runCmd(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

// TestHelp: -h (for the command or for a subcommand) and "help" print the
// usage or the flags and exit 0, without an error line.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"help"}, {"--help"}, {"check", "-h"}, {"bench", "-h"}, {"serve", "-help"}} {
		code, out, errOut := runCmd(t, args...)
		if code != 0 || strings.Contains(errOut, "help requested") || !strings.Contains(out+errOut, "-redis") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 0 and the flags, no error", args, code, out, errOut)
		}
	}
}

// TestCheckOnRedisURL runs selected checks on a real server given by URL:
// a shared server, so the suite skips what would flush or restart it and
// leaves no keys behind.
func TestCheckOnRedisURL(t *testing.T) {
	s := redistest.StartServer(t)
	code, out, errOut := runCmd(t, "check", "-redis", "redis://"+s.Addr()+"/0",
		"-checks", "weighted-costs,noscript-invisible,lost-reply-counted-once,short-and-long-windows")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	assertReport(t, out, "P16 noscript-invisible", 4)
	assertNoKeys(t, s.Addr())
}

// TestCheckInterrupted: check -redis interrupted (its context ended, as
// Ctrl-C or SIGTERM end it) starts no further check, lets the running one
// delete its keys (self-repair strips keys of their TTL: left behind, they
// would live for ever), reports the rows so far and exits 1.
func TestCheckInterrupted(t *testing.T) {
	s := redistest.StartServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut bytes.Buffer
	time.AfterFunc(1500*time.Millisecond, cancel)
	start := time.Now()
	code := run(ctx, []string{"check", "-json", "-redis", "redis://" + s.Addr(), "-checks", "self-repair,window-never-slides,bounded-ttls"}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "interrupted after") {
		t.Errorf("exit %d after %s; want 1 and the interruption reported\n%s\n%s", code, time.Since(start), out.String(), errOut.String())
	}
	// -json says so too: the rows that ran, of how many
	var rep jsonReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || !rep.Interrupted || len(rep.Rows) >= rep.Checks {
		t.Errorf("-json report of an interrupted run: %v; interrupted %v, %d of %d rows; want interrupted, fewer rows than checks\n%s", err, rep.Interrupted, len(rep.Rows), rep.Checks, out.String())
	}
	if strings.Count(errOut.String(), "\n[") >= 3*len(conformance.Strategies())*len(adapters()) {
		t.Errorf("every check ran: the interruption stopped nothing\n%s", errOut.String())
	}
	assertNoKeys(t, s.Addr())
}

// TestCheckKnownBadTwiceOnRedisURL runs the known-bad control of property
// 17 twice on one shared server, which keeps its script cache between
// runs: the second run's InlinedLimits still sends its scripts' sources
// and fails as it must.
func TestCheckKnownBadTwiceOnRedisURL(t *testing.T) {
	s := redistest.StartServer(t)
	for run := 1; run <= 2; run++ {
		code, out, errOut := runCmd(t, "check", "-known-bad", "-redis", "redis://"+s.Addr(), "-checks", "scripts-are-constants")
		if code != 0 {
			t.Fatalf("run %d: exit %d\n%s\n%s", run, code, out, errOut)
		}
		if n := strings.Count(out, "FAIL (expected)"); n != len(adapters()) || !strings.Contains(out, "InlinedLimits") {
			t.Errorf("run %d: %d known-bad failures, want InlinedLimits failing on each of %d adapters:\n%s", run, n, len(adapters()), out)
		}
	}
	assertNoKeys(t, s.Addr())
}

// assertNoKeys fails t when the server at addr holds any key: a command run
// on a shared server must leave nothing behind.
func assertNoKeys(t *testing.T, addr string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	keys, err := rdb.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("%d keys left on a shared server: %q", len(keys), keys)
	}
}

// TestCheckOnCluster runs selected checks on a real cluster given by
// -cluster: keys are checked against the server's CLUSTER KEYSLOT.
func TestCheckOnCluster(t *testing.T) {
	c := redistest.StartCluster(t)
	code, out, errOut := runCmd(t, "check", "-cluster", strings.Join(c.Addrs(), ","),
		"-checks", "weighted-costs,multi-rule-all-or-nothing,same-slot-for-hostile-subjects,lost-reply-counted-once")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "cluster at ") {
		t.Errorf("report does not name the cluster:\n%s", out)
	}
	assertReport(t, out, "P19 lost-reply-counted-once", 4)
}

// assertReport checks a report of the given number of checks per strategy
// and adapter: one row each, none failed, and exactly the rows of skipped
// (a check the backend cannot run) marked skip.
func assertReport(t *testing.T, out, skipped string, checks int) {
	t.Helper()
	cells := strategyCells()
	rows, skips := 0, 0
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, " P") {
			continue
		}
		rows++
		if strings.Contains(line, skipped) {
			if !strings.Contains(line, " skip ") || len(strings.Fields(line)) < 7 {
				t.Errorf("row not skipped, or without the reason: %s", line)
			}
			skips++
		} else if !strings.Contains(line, " pass ") {
			t.Errorf("row did not pass: %s", line)
		}
	}
	if rows != checks*cells || skips != cells {
		t.Errorf("%d rows (%d skipped), want %d (%d skipped):\n%s", rows, skips, checks*cells, cells, out)
	}
	want := fmt.Sprintf("%d passed, 0 failed, %d skipped", (checks-1)*cells, cells)
	if !strings.Contains(out, want) {
		t.Errorf("summary is not %q:\n%s", want, out)
	}
}

// TestCheckReportsEvictionRisk: on a server whose maxmemory-policy can evict
// the limiter's keys, check says so in its header, above the matrix.
func TestCheckReportsEvictionRisk(t *testing.T) {
	s := redistest.StartServer(t, "--maxmemory", "100mb", "--maxmemory-policy", "volatile-lru")
	code, out, errOut := runCmd(t, "check", "-redis", "redis://"+s.Addr(), "-checks", "hostile-costs")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"server: Redis ", "standalone", "maxmemory-policy volatile-lru", "scripts allowed",
		"warning: maxmemory-policy volatile-lru evicts keys with a TTL first"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if i, j := strings.Index(out, "warning:"), strings.Index(out, "STRATEGY"); i < 0 || j < i {
		t.Errorf("the warning is not above the matrix:\n%s", out)
	}
	assertNoKeys(t, s.Addr())
}

// TestCheckOverTLS runs check on a TLS-only server given by a rediss://
// URL: with -tls-ca the checks pass, the fault-proxy checks are skipped
// with their reason, and the header names TLS and the eviction risk; with
// an untrusted certificate check ends promptly, naming the certificate.
func TestCheckOverTLS(t *testing.T) {
	s := redistest.StartTLSServer(t, "--maxmemory", "100mb", "--maxmemory-policy", "volatile-lru")
	url := "rediss://" + s.Addr()
	certs := s.TLS()

	t.Run("trusted", func(t *testing.T) {
		code, out, errOut := runCmd(t, "check", "-redis", url, "-tls-ca", certs.CAFile, "-v",
			"-checks", "weighted-costs,multi-rule-all-or-nothing,lost-reply-counted-once")
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
		for _, want := range []string{"over TLS", "maxmemory-policy volatile-lru", "warning: maxmemory-policy volatile-lru evicts keys with a TTL first",
			"strategies here: FixedWindow, AlignedWindow, Bucketed, Optimistic", "no fault proxy on this TLS backend"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		assertReport(t, out, "P19 lost-reply-counted-once", 3)
	})
	t.Run("client-certificate", func(t *testing.T) {
		code, out, errOut := runCmd(t, "check", "-redis", url, "-tls-ca", certs.CAFile,
			"-tls-cert", certs.ClientCertFile, "-tls-key", certs.ClientKeyFile, "-checks", "weighted-costs")
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
	})
	t.Run("insecure", func(t *testing.T) {
		code, out, errOut := runCmd(t, "check", "-redis", url, "-tls-insecure", "-checks", "weighted-costs")
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
	})
	t.Run("untrusted", func(t *testing.T) {
		start := time.Now()
		code, out, errOut := runCmd(t, "check", "-redis", url, "-checks", "weighted-costs")
		if code != 1 || !strings.Contains(out+errOut, "certificate") {
			t.Errorf("exit %d, want 1 with an error naming the certificate\n%s\n%s", code, out, errOut)
		}
		if took := time.Since(start); took > 8*time.Second { // a level takes 10 s
			t.Errorf("check with an untrusted certificate took %v", took)
		}
	})
	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{
			{"-redis", "redis://" + s.Addr(), "-tls-ca", certs.CAFile}, // TLS options need rediss://
			{"-redis", url, "-tls-cert", certs.ClientCertFile},         // a certificate without its key
			{"-redis", url, "-tls-ca", "/nonexistent/ca.pem"},
		} {
			if code, out, errOut := runCmd(t, append([]string{"check"}, args...)...); code != 2 {
				t.Errorf("%q: exit %d, want 2\n%s\n%s", args, code, out, errOut)
			}
		}
	})
}

// strategyCells is the number of strategies times the number of adapters:
// the rows of one strategy check (the leaser's checks are others).
func strategyCells() int {
	n := 0
	for _, spec := range conformance.Strategies() {
		if spec.Strategy != nil {
			n++
		}
	}
	return n * len(adapters())
}

// firstWrite records when it was first written to.
type firstWrite struct {
	bytes.Buffer
	at time.Time
}

func (w *firstWrite) Write(p []byte) (int, error) {
	if w.at.IsZero() {
		w.at = time.Now()
	}
	return w.Buffer.Write(p)
}

// TestCheckJSON: -json prints one JSON object that parses, with a row per
// strategy, adapter and check and the counts that add up; the progress
// lines go to stderr, the first at once.
func TestCheckJSON(t *testing.T) {
	names := []string{"multi-rule-all-or-nothing", "leases-exact"}
	var out bytes.Buffer
	var errOut firstWrite
	start := time.Now()
	code := run(context.Background(), []string{"check", "-json", "-known-bad", "-checks", strings.Join(names, ",")}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	if wait := errOut.at.Sub(start); wait > 2*time.Second {
		t.Errorf("the first progress line came %s after the start", wait)
	}
	var rep struct {
		Backend                 string
		Checks                  int
		Interrupted             bool
		Passed, Failed, Skipped int
		Caught                  int `json:"known_bad_caught"`
		Rows                    []struct {
			Strategy, Adapter, Check, Result string
			ID                               int
			KnownBad                         bool `json:"known_bad"`
		}
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("output does not parse: %v\n%s", err, out.String())
	}
	matrix := 0
	for _, spec := range conformance.Strategies() {
		for _, n := range names {
			if ch, _ := conformance.CheckByName(n); ch.For(spec) {
				matrix++
			}
		}
	}
	matrix *= len(adapters())
	if rep.Passed != matrix || rep.Failed != 0 || rep.Skipped != 0 || rep.Caught == 0 || len(rep.Rows) != rep.Passed+rep.Caught {
		t.Errorf("passed %d (want %d), failed %d, skipped %d, caught %d, %d rows", rep.Passed, matrix, rep.Failed, rep.Skipped, rep.Caught, len(rep.Rows))
	}
	if rep.Checks != len(rep.Rows) || rep.Interrupted {
		t.Errorf("checks %d, interrupted %v; want %d (every row ran), not interrupted", rep.Checks, rep.Interrupted, len(rep.Rows))
	}
	for _, r := range rep.Rows {
		if (r.Result == "pass") == r.KnownBad || r.Strategy == "" || r.Adapter == "" || r.ID == 0 {
			t.Errorf("row %+v", r)
		}
	}
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "running ") }) ||
		!slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, fmt.Sprintf("[%d/%d ", len(rep.Rows), len(rep.Rows))) }) {
		t.Errorf("progress on stderr:\n%s", errOut.String())
	}
}

// TestBenchInterrupted: bench -redis interrupted (its context ended, as
// Ctrl-C or SIGTERM end it) stops the running level, which deletes the keys
// it wrote (the deny workload's live a day), and exits 1 saying so,
// long before the level would have ended (it ran the level to its end).
func TestBenchInterrupted(t *testing.T) {
	benchInterrupted(t, "-workloads", "deny", "-callers", "1", "-rounds", "2", "-round", "2s") // a level takes 10 s
}

// TestBenchInterruptedCountingAllocations: Ctrl-C during the allocation
// count (before a level's rounds) stops it at its next call, as it stops
// the rounds (it ran all -allocs calls first: 97 s for a million).
func TestBenchInterruptedCountingAllocations(t *testing.T) {
	benchInterrupted(t, "-callers", "1", "-rounds", "1", "-round", "10ms", "-allocs", "100000000")
}

// benchInterrupted runs bench with args through go-redis on a server of
// its own, interrupts it after 1.5 s, and wants it to stop soon, exit 1,
// say so and leave no key.
func benchInterrupted(t *testing.T, args ...string) {
	t.Helper()
	s := redistest.StartServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut bytes.Buffer
	time.AfterFunc(1500*time.Millisecond, cancel)
	start := time.Now()
	code := run(ctx, append([]string{"bench", "-redis", "redis://" + s.Addr(), "-adapters", "goredis"}, args...), &out, &errOut)
	took := time.Since(start)
	if code != 1 || !strings.Contains(errOut.String(), "interrupted after") || took > 8*time.Second {
		t.Errorf("%v: exit %d after %s; want 1 and the interruption reported, soon\n%s\n%s", args, code, took, out.String(), errOut.String())
	}
	assertNoKeys(t, s.Addr())
}

// TestControlFailedOnHarness: a known-bad control that failed only on its
// harness (here, its server could not be dialed) did not show its mistake:
// it is a failure of the run, not a control caught, in the table and in
// -json (both counted it caught).
func TestControlFailedOnHarness(t *testing.T) {
	rows := []row{
		{adapter: "goredis", expected: true, Outcome: conformance.Outcome{Spec: "GetThenIncr", Check: "exact-admission", ID: 1,
			Messages: []string{"property 1: 12 admitted under a limit of 10"}}},
		{adapter: "goredis", expected: true, Outcome: conformance.Outcome{Spec: "GetThenIncr", Check: "exact-admission", ID: 1,
			Messages: []string{"make harness: conformance: dial 127.0.0.1:1: connection refused"}}},
	}
	var table bytes.Buffer
	code := report(&table, rows, false, time.Second)
	if code != 1 || !strings.Contains(table.String(), "FAIL (harness)") || !strings.Contains(table.String(), "0 passed, 1 failed, 0 skipped; 1 known-bad failures caught") {
		t.Errorf("table: exit %d\n%s\nwant exit 1, the harness failure a failure, 1 caught", code, table.String())
	}
	// why the run failed is printed (it was only with -v), the caught
	// control's expected failure not
	if !strings.Contains(table.String(), "connection refused") || strings.Contains(table.String(), "12 admitted") {
		t.Errorf("table:\n%s\nwant the harness failure's message, not the caught control's", table.String())
	}
	var js bytes.Buffer
	code, err := reportJSON(&js, "test", rows, time.Second, len(rows), false)
	var rep jsonReport
	if jerr := json.Unmarshal(js.Bytes(), &rep); err != nil || jerr != nil || code != 1 || rep.Caught != 1 || rep.Failed != 1 || rep.Rows[1].Result != "fail" {
		t.Errorf("-json: exit %d, %v, %v: caught %d, failed %d, rows %+v; want exit 1, 1 caught, 1 failed (\"fail\")", code, err, jerr, rep.Caught, rep.Failed, rep.Rows)
	}
}
