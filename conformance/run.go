package conformance

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Outcome is the result of one check run by Run.
type Outcome struct {
	// Spec names the strategy ("store" for a store check).
	Spec string
	// Check names the check; ID is its test-plan number (0 for store checks).
	Check string
	ID    int
	// Passed, Skipped: the verdict. A check that neither passed nor was
	// skipped failed.
	Passed, Skipped bool
	// Messages are the check's error, fatal, skip and log lines.
	Messages []string
	// SkipReason is why the check skipped ("" when it ran).
	SkipReason string
	// Elapsed is how long the check ran.
	Elapsed time.Duration
}

// harnessFailures begin the messages of a check that failed before or
// beside what it checks: it could not set up (a dial, limiter.New),
// panicked, or did not finish.
var harnessFailures = []string{"make harness", "limiter.New", "panic:", "the check did not finish"}

// FailedOnFinding reports a failed check with at least one message of its
// own findings, not only of its harness (a dial, limiter.New, a panic, a
// hang): a known-bad control shown to fail a property fails so.
func (o Outcome) FailedOnFinding() bool {
	if o.Passed || o.Skipped {
		return false
	}
	return slices.ContainsFunc(o.Messages, func(m string) bool {
		for _, h := range harnessFailures {
			if strings.HasPrefix(m, h) {
				return false
			}
		}
		return true
	})
}

// Run runs checks (all when nil) against every spec, and the store checks
// when store is true, on harnesses from mk, without the testing package: the
// limiter command reports with it, and tests use it to prove that a
// known-bad implementation fails. Once ctx is done Run starts no further
// check: the one running finishes, and deletes its keys from a shared
// server, before Run returns the outcomes so far.
func Run(ctx context.Context, mk HarnessMaker, specs []Spec, checks []Check, storeChecks bool) []Outcome {
	if checks == nil {
		checks = Checks()
	}
	var out []Outcome
	if storeChecks {
		out = runStoreChecks(ctx, mk, StoreChecks())
	}
	for _, spec := range specs {
		for _, ch := range checks {
			if !ch.For(spec) || ctx.Err() != nil {
				continue
			}
			o := record(ctx, func(t testing.TB) { RunCheck(t, mk, spec, ch) })
			o.Spec, o.Check, o.ID = spec.Name, ch.Name, ch.ID
			out = append(out, o)
		}
	}
	return out
}

// RunStoreChecks runs the given store checks on harnesses from mk, one
// after another, and returns their outcomes (Spec "store"), as Run does for
// a strategy's checks. It stops starting checks when ctx ends.
func RunStoreChecks(ctx context.Context, mk HarnessMaker, scs []StoreCheck) []Outcome {
	return runStoreChecks(ctx, mk, scs)
}

func runStoreChecks(ctx context.Context, mk HarnessMaker, scs []StoreCheck) []Outcome {
	var out []Outcome
	for _, sc := range scs {
		if ctx.Err() != nil {
			break
		}
		o := record(ctx, func(t testing.TB) { RunStoreCheck(t, mk, sc) })
		o.Spec, o.Check = "store", sc.Name
		out = append(out, o)
	}
	return out
}

// checkDeadline bounds one check run by Run: far above what any check
// takes on a busy machine (a minute at most), so that only a hang meets
// it. A variable so that the package's own test can shorten it.
var checkDeadline = 5 * time.Minute

// record runs f with a recorder as its testing.TB, then its cleanups, each
// on a goroutine of its own so that FailNow and SkipNow (in the check or in
// a cleanup) end only it. A check still running at checkDeadline (a call
// without a deadline on a server that never answers) fails, and is left
// behind with its cleanups.
func record(ctx context.Context, f func(testing.TB)) Outcome {
	r := &recorder{ctx: ctx}
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.guarded(func() { f(r) })
		r.runCleanups()
	}()
	timer := time.NewTimer(checkDeadline)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		r.Errorf("the check did not finish within %s: something it waits for never answers (a call without a deadline on a server that does not reply?); it was left running", checkDeadline)
		r.mu.Lock()
		abandon := r.abandon
		r.mu.Unlock()
		for _, f := range abandon {
			f()
		}
	}
	return Outcome{
		Passed:     !r.Failed() && !r.Skipped(),
		Skipped:    r.Skipped() && !r.Failed(),
		Messages:   r.messages(),
		SkipReason: r.reason(),
		Elapsed:    time.Since(start),
	}
}

// recorder is a testing.TB that records instead of reporting. The embedded
// interface is nil: a check that calls a method not implemented here
// panics, and the panic is recorded as a failure.
type recorder struct {
	testing.TB
	ctx context.Context

	mu       sync.Mutex
	failed   bool
	skipped  bool
	msgs     []string
	cleanups []func()
	abandon  []func() // called when the check is left running

	skipReason string
}

// onAbandon registers f to be called if the check is left running past
// its deadline.
func (r *recorder) onAbandon(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.abandon = append(r.abandon, f)
}

func (r *recorder) add(failed, skipped bool, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = r.failed || failed
	r.skipped = r.skipped || skipped
	if msg != "" {
		r.msgs = append(r.msgs, msg)
	}
}

func (r *recorder) reason() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.skipped || r.failed {
		return ""
	}
	return r.skipReason
}

func (r *recorder) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

// guarded runs fn on a goroutine of its own and waits for it: a FailNow,
// SkipNow or panic ends fn, not the caller; a panic is recorded as a
// failure.
func (r *recorder) guarded(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				r.Errorf("panic: %v", p)
			}
		}()
		fn()
	}()
	<-done
}

func (r *recorder) runCleanups() {
	r.mu.Lock()
	cs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		r.guarded(cs[i])
	}
}

func (r *recorder) Helper()                  {}
func (r *recorder) Name() string             { return "conformance" }
func (r *recorder) Context() context.Context { return r.ctx }
func (r *recorder) Log(args ...any)          { r.add(false, false, fmt.Sprint(args...)) }
func (r *recorder) Logf(format string, args ...any) {
	r.add(false, false, fmt.Sprintf(format, args...))
}
func (r *recorder) Error(args ...any) { r.add(true, false, fmt.Sprint(args...)) }
func (r *recorder) Errorf(format string, args ...any) {
	r.add(true, false, fmt.Sprintf(format, args...))
}
func (r *recorder) Fail()                             { r.add(true, false, "") }
func (r *recorder) FailNow()                          { r.Fail(); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); runtime.Goexit() }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }
func (r *recorder) Skip(args ...any)                  { r.skip(fmt.Sprint(args...)) }
func (r *recorder) Skipf(format string, args ...any) {
	r.skip(fmt.Sprintf(format, args...))
}

func (r *recorder) skip(reason string) {
	r.mu.Lock()
	if r.skipReason == "" {
		r.skipReason = reason
	}
	r.mu.Unlock()
	r.add(false, true, reason)
	runtime.Goexit()
}
func (r *recorder) SkipNow() { r.add(false, true, ""); runtime.Goexit() }

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recorder) Skipped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.skipped
}

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *recorder) TempDir() string {
	dir, err := os.MkdirTemp("", "conformance")
	if err != nil {
		r.Fatalf("TempDir: %v", err)
	}
	r.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
