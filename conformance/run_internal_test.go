package conformance

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A check that hangs fails at checkDeadline with a message saying so,
// instead of hanging Run (and limiter check) for ever.
func TestRecordBoundsAHang(t *testing.T) {
	defer func(d time.Duration) { checkDeadline = d }(checkDeadline)
	checkDeadline = 50 * time.Millisecond
	release := make(chan struct{})
	defer close(release)
	start := time.Now()
	o := record(context.Background(), func(testing.TB) { <-release })
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("record returned after %s", took)
	}
	if o.Passed || o.Skipped || len(o.Messages) != 1 || !strings.Contains(o.Messages[0], "did not finish within 50ms") {
		t.Errorf("a hung check = %+v; want failed, saying it did not finish", o)
	}
	// A check that ends in time is judged as before.
	o = record(context.Background(), func(t testing.TB) { t.Log("ok") })
	if !o.Passed {
		t.Errorf("a quick check = %+v; want passed", o)
	}
}

// A cleanup that fails fatally (a shared server that cannot be reached to
// delete the check's keys) fails the check and ends only itself: the other
// cleanups run and the caller goes on.
func TestRecordFatalCleanup(t *testing.T) {
	ran := false
	o := record(context.Background(), func(tb testing.TB) {
		tb.Cleanup(func() { ran = true })
		tb.Cleanup(func() { tb.Fatal("cleanup: server unreachable") })
		tb.Cleanup(func() { panic("boom") })
	})
	if o.Passed || !ran || len(o.Messages) != 2 || !strings.Contains(o.Messages[0], "panic: boom") || o.Messages[1] != "cleanup: server unreachable" {
		t.Errorf("record = %+v (first cleanup ran: %v); want failed with both messages, every cleanup run", o, ran)
	}
}
