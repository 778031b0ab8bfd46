package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/internal/redistest"
)

// TestReportExitStatus: the table and -json exit 1 when a check failed,
// and when a known-bad control passed a check it must fail (doc.go: "exits
// 1 if any check fails"; "-known-bad ... do not change the exit status
// unless one of them passes a check it must fail").
func TestReportExitStatus(t *testing.T) {
	pass := row{adapter: "goredis", Outcome: conformance.Outcome{Spec: "FixedWindow", Check: "exact-admission", ID: 1, Passed: true}}
	failed := row{adapter: "goredis", Outcome: conformance.Outcome{Spec: "FixedWindow", Check: "exact-admission", ID: 1,
		Messages: []string{"property 1: 12 admitted under a limit of 10"}}}
	ctlPassed := row{adapter: "goredis", expected: true, Outcome: conformance.Outcome{Spec: "GetThenIncr", Check: "exact-admission", ID: 1, Passed: true}}
	for name, c := range map[string]struct {
		rows    []row
		verdict string
	}{"a failed check": {[]row{pass, failed}, " FAIL "}, "a control that passed": {[]row{pass, ctlPassed}, " PASS (must fail) "}} {
		rows := c.rows
		var table bytes.Buffer
		if code := report(&table, rows, false, time.Second); code != 1 || !strings.Contains(table.String(), "1 passed, 1 failed") || !strings.Contains(table.String(), c.verdict) {
			t.Errorf("%s: table exit %d, want 1 and \"1 passed, 1 failed\"\n%s", name, code, table.String())
		}
		var js bytes.Buffer
		code, err := reportJSON(&js, "test", rows, time.Second, len(rows), false)
		var rep jsonReport
		if jerr := json.Unmarshal(js.Bytes(), &rep); err != nil || jerr != nil || code != 1 || rep.Failed != 1 || rep.Passed != 1 {
			t.Errorf("%s: -json exit %d (%v, %v), passed %d failed %d; want 1, 1 passed, 1 failed", name, code, err, jerr, rep.Passed, rep.Failed)
		}
	}
}

// TestCheckInterruptedTable: an interrupted run exits 1 with the table
// too, not only with -json.
func TestCheckInterruptedTable(t *testing.T) {
	s := redistest.StartServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut bytes.Buffer
	time.AfterFunc(1500*time.Millisecond, cancel)
	code := run(ctx, []string{"check", "-redis", "redis://" + s.Addr(), "-checks", "self-repair,window-never-slides,bounded-ttls"}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "interrupted after") {
		t.Errorf("exit %d; want 1 and the interruption reported\n%s\n%s", code, out.String(), errOut.String())
	}
}

// TestPasswordWithAt: a password holding '@' (the user information ends
// at the last '@') is masked whole.
func TestPasswordWithAt(t *testing.T) {
	code, out, errOut := runCmd(t, "check", "-redis", "redis://u:s3cr@tpw@127.0.0.1:x")
	if code != 2 || strings.Contains(out+errOut, "tpw") || !strings.Contains(errOut, "u:xxxxx@127.0.0.1:x") {
		t.Errorf("exit %d, %s; want 2 and the password masked", code, strings.TrimSpace(out+errOut))
	}
}
