package conformance

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quotagate/limiter/store"
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

// fullStore stands for an adapter's store: a store.Store with a Watcher
// and a store.Int64sEvaler (its methods are never called here).
type fullStore struct {
	store.Store
	store.Watcher
	store.Int64sEvaler
}

// TestWrappersKeepTheFastPath: the checks' store wrappers keep what the
// wrapped store offers, so that a strategy takes the path it takes in
// production (an integer script through store.Int64sEvaler, not the boxed
// EVALSHA), and the hook fires after an integer script's round trip too.
func TestWrappersKeepTheFastPath(t *testing.T) {
	inner := fullStore{}
	hs := newHookStore(inner)
	for name, st := range map[string]store.Store{"hookStore": hs.store(), "txRecorder": newTxRecorder(inner).store()} {
		if _, ok := st.(store.Int64sEvaler); !ok {
			t.Errorf("%s hides the store's Int64sEvaler", name)
		}
		if _, ok := st.(store.Watcher); !ok {
			t.Errorf("%s hides the store's Watcher", name)
		}
	}
	if _, ok := newHookStore(struct{ store.Store }{}).store().(store.Int64sEvaler); ok {
		t.Errorf("hookStore claims an Int64sEvaler its store lacks")
	}
	fired := false
	hs.arm(func() { fired = true })
	ev := hs.store().(store.Int64sEvaler)
	func() {
		defer func() { _ = recover() }() // fullStore's nil Int64sEvaler
		_, _ = ev.EvalShaInt64s(context.Background(), "sha", nil, nil, nil)
	}()
	if !fired {
		t.Errorf("the hook did not fire after an integer script")
	}
}
