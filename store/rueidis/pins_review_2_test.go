package rueidis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
)

// TestWatchDoneContextIsNotUnknownOutcome: a Watch whose context is
// done before the call sends nothing, calls no fn, and is the context's
// error, not store.ErrUnknownOutcome (which limiter.ErrorKind would count
// as "unknown_outcome" instead of "canceled"). Repeated: without the
// up-front check the result depends on a select between the context and
// the background WATCH, which the context wins almost always.
func TestWatchDoneContextIsNotUnknownOutcome(t *testing.T) {
	m := redistest.NewMini(t)
	p := redistest.NewProxy(t, m.Addr())
	st := newStore(t, p.Addr(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.ResetCounts()
	for i := range 20 {
		called := false
		err := st.Watch(ctx, []string{"k"}, func(store.Tx) error { called = true; return nil })
		if !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrUnknownOutcome) || called {
			t.Fatalf("Watch %d with a cancelled context = %v (fn called: %v); want Canceled, not ErrUnknownOutcome, fn not called", i, err, called)
		}
	}
	if n := p.Commands(); n["WATCH"] != 0 {
		t.Errorf("WATCH reached the server: %v", n)
	}
}

// TestWatchGivenUpAtDeadlineIsUnknownOutcome: a Watch that returns at
// its deadline while rueidis is still making its connection (the
// connection's handshake replies are held back) reports the deadline and
// store.ErrUnknownOutcome, as the adapter documents for any call given up
// on (the WATCH may have been written).
func TestWatchGivenUpAtDeadlineIsUnknownOutcome(t *testing.T) {
	m := redistest.NewMini(t)
	p := redistest.NewProxy(t, m.Addr())
	st := newStore(t, p.Addr(), nil)
	do1(t, st, "PING") // the shared connection is up before the delay
	p.Delay(3 * time.Second)
	t.Cleanup(func() { p.Delay(0) })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	called := false
	err := st.Watch(ctx, []string{"k"}, func(store.Tx) error { called = true; return nil })
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, store.ErrUnknownOutcome) || called {
		t.Errorf("Watch past its deadline = %v (fn called: %v); want DeadlineExceeded and ErrUnknownOutcome, fn not called", err, called)
	}
}

// TestWatchAddedInDoAfterExecIsCleared: fn runs a transaction (EXEC
// clears the WATCH), then WATCHes another key through Tx.Do (allowed by the
// Tx contract) and returns. The connection, the only one of the pool, must
// not keep that WATCH: the next Watch's transaction on another key commits
// although the key watched in Do has changed since.
func TestWatchAddedInDoAfterExecIsCleared(t *testing.T) {
	backends(t, func(t *testing.T, addr string) {
		st := watchStore(t, addr)
		ctx := context.Background()
		err := st.Watch(ctx, []string{"{w}:k"}, func(tx store.Tx) error {
			if _, err := tx.Exec(ctx, store.Cmd{Name: "INCR", Args: []any{"{w}:k"}}); err != nil {
				return err
			}
			_, err := tx.Do(ctx, store.Cmd{Name: "WATCH", Args: []any{"{w}:k2"}})
			return err
		})
		if err != nil {
			t.Fatalf("first Watch: %v", err)
		}
		do1(t, st, "SET", "{w}:k2", "changed")
		err = st.Watch(ctx, []string{"{w}:fresh"}, func(tx store.Tx) error {
			_, err := tx.Exec(ctx, store.Cmd{Name: "SET", Args: []any{"{w}:fresh", "v"}})
			return err
		})
		if err != nil {
			t.Errorf("a transaction after a Watch that WATCHed in Do after its EXEC = %v; want committed (the connection kept the WATCH of {w}:k2)", err)
		}
	})
}

// TestWatchCancelledInFnLeavesConnectionUnwatched: fn's context is
// cancelled while the keys are watched and fn returns without EXEC, so the
// UNWATCH goes in the background. The connection (the only one of the
// pool) must come back un-watched: the next Watch's transaction on
// another key commits although the first key has changed since.
func TestWatchCancelledInFnLeavesConnectionUnwatched(t *testing.T) {
	backends(t, func(t *testing.T, addr string) {
		st := watchStore(t, addr)
		do1(t, st, "SET", "{w}:k", "1")
		ctx, cancel := context.WithCancel(context.Background())
		err := st.Watch(ctx, []string{"{w}:k"}, func(tx store.Tx) error {
			if _, err := tx.Do(ctx, store.Cmd{Name: "GET", Args: []any{"{w}:k"}}); err != nil {
				return err
			}
			cancel()
			return nil
		})
		if err != nil {
			t.Fatalf("first Watch: %v", err)
		}
		do1(t, st, "SET", "{w}:k", "changed")
		ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel2()
		err = st.Watch(ctx2, []string{"{w}:fresh"}, func(tx store.Tx) error {
			_, err := tx.Exec(ctx2, store.Cmd{Name: "SET", Args: []any{"{w}:fresh", "v"}})
			return err
		})
		if err != nil {
			t.Errorf("a transaction after a Watch whose context was cancelled in fn = %v; want committed (the connection kept its WATCH of {w}:k)", err)
		}
	})
}

// TestWatchRedisDownIsNotUnknownOutcome: with Redis down, a WATCH
// that could not even connect sent nothing: Watch's error is the dial's,
// not store.ErrUnknownOutcome (limiter.ErrorKind "backend", not
// "unknown_outcome").
func TestWatchRedisDownIsNotUnknownOutcome(t *testing.T) {
	m := redistest.NewMini(t)
	st := newStore(t, m.Addr(), nil)
	if r := do1(t, st, "PING"); r.Val != "PONG" {
		t.Fatalf("PING = %#v", r)
	}
	m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := st.Watch(ctx, []string{"k"}, func(store.Tx) error { return nil })
	if err == nil || errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("Watch with Redis down (no Watch connection made before) = %v; want the dial error, not ErrUnknownOutcome", err)
	}
}

// TestEvalLostReplyIsUnknownOutcome: a script call through the
// generic EvalSha and Eval (which store.Script.Run, and so concurrency
// leases, use) whose reply is lost after it ran wraps
// store.ErrUnknownOutcome: the caller must not take it as not run.
func TestEvalLostReplyIsUnknownOutcome(t *testing.T) {
	m := redistest.NewMini(t)
	p := redistest.NewProxy(t, m.Addr())
	st := newStore(t, p.Addr(), nil)
	ctx := context.Background()
	const src = "return redis.call('INCR', KEYS[1])"
	if _, err := st.Eval(ctx, src, []string{"n"}, nil); err != nil { // (caches it)
		t.Fatal(err)
	}
	sha := store.NewScript(src).Hash()
	up := func() { // a new connection replaces the one the proxy closed
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, err := st.Do(ctx, store.Cmd{Name: "PING"}); err == nil {
				return
			} else if time.Now().After(deadline) {
				t.Fatalf("PING after the dropped reply: %v", err)
			}
		}
	}
	p.DropReply("EVALSHA")
	if _, err := st.EvalSha(ctx, sha, []string{"n"}, nil); !errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("EvalSha whose reply was lost = %v; want ErrUnknownOutcome", err)
	}
	up()
	p.DropReply("EVAL")
	if _, err := st.Eval(ctx, src, []string{"n"}, nil); !errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("Eval whose reply was lost = %v; want ErrUnknownOutcome", err)
	}
	up()
	if r := do1(t, st, "GET", "n"); r.Val != "3" {
		t.Errorf("n = %v; want 3 (both lost calls ran)", r.Val)
	}
}

// TestErroredConnectionIsNotKept: a Watch whose connection got an
// error reply from the server (READONLY after a Sentinel failover, NOPERM,
// ...: here a plain WRONGTYPE-like refusal) leaves the connection closed,
// not kept: the next Watch, on a pool of one, runs on a new connection.
// (A kept one could be a demoted master's, refusing every later Watch.)
func TestErroredConnectionIsNotKept(t *testing.T) {
	srv := redistest.StartServer(t)
	st := watchStore(t, srv.Addr())
	ctx := context.Background()
	do1(t, st, "SET", "{w}:s", "text")
	var first, second string
	err := st.Watch(ctx, []string{"{w}:s"}, func(tx store.Tx) error {
		first = clientID(t, tx)
		rs, err := tx.Do(ctx, store.Cmd{Name: "INCR", Args: []any{"{w}:s"}})
		if err != nil || rs[0].Err == nil {
			t.Fatalf("INCR of a string = %v, %v; want an error reply", rs, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = st.Watch(ctx, []string{"{w}:s"}, func(tx store.Tx) error {
		second = clientID(t, tx)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if first == "" || first == second {
		t.Errorf("the Watch after an error reply ran on connection %q, the errored one was %q; want a new connection", second, first)
	}
}

// TestPipelineLostReplyIsUnknownOutcome: a pipeline (Store.Do of
// several commands, and Tx.Do) whose replies are lost after its commands
// ran fails as a whole with store.ErrUnknownOutcome (store.Store.Do's
// contract), not with plain per-command errors and a nil error.
func TestPipelineLostReplyIsUnknownOutcome(t *testing.T) {
	m := redistest.NewMini(t)
	p := redistest.NewProxy(t, m.Addr())
	st := newStore(t, p.Addr(), nil)
	ctx := context.Background()
	do1(t, st, "SET", "a", "1")
	p.DropReply("INCR")
	rs, err := st.Do(ctx, store.Cmd{Name: "INCR", Args: []any{"a"}}, store.Cmd{Name: "INCR", Args: []any{"b"}})
	if !errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("Do(INCR, INCR) whose replies were lost = %v, %v; want ErrUnknownOutcome", rs, err)
	}
	if p.Disarm() {
		t.Fatal("the fault did not fire")
	}
	// the same through a Watch's Tx.Do, on a connection of its own
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := st.Do(ctx, store.Cmd{Name: "PING"}); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("PING after the dropped reply: %v", err)
		}
	}
	var txErr error
	err = st.Watch(ctx, []string{"a"}, func(tx store.Tx) error {
		p.DropReply("GET")
		_, txErr = tx.Do(ctx, store.Cmd{Name: "GET", Args: []any{"a"}}, store.Cmd{Name: "PTTL", Args: []any{"a"}})
		return txErr
	})
	if !errors.Is(txErr, store.ErrUnknownOutcome) || !errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("Tx.Do(GET, PTTL) whose replies were lost = %v (Watch: %v); want ErrUnknownOutcome", txErr, err)
	}
}

// TestNoUnwatchAfterExec: EXEC clears the WATCH, so a Watch whose
// transaction got EXEC's reply sends no UNWATCH (one round trip less per
// optimistic decision); a Watch that returns without EXEC sends one.
func TestNoUnwatchAfterExec(t *testing.T) {
	m := redistest.NewMini(t)
	p := redistest.NewProxy(t, m.Addr())
	st := newStore(t, p.Addr(), nil)
	ctx := context.Background()
	p.ResetCounts()
	err := st.Watch(ctx, []string{"k"}, func(tx store.Tx) error {
		_, err := tx.Exec(ctx, store.Cmd{Name: "INCR", Args: []any{"k"}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := p.Commands(); n["EXEC"] != 1 || n["UNWATCH"] != 0 {
		t.Errorf("commands of a Watch with a committed EXEC: %v; want 1 EXEC, no UNWATCH", n)
	}
	p.ResetCounts()
	if err := st.Watch(ctx, []string{"k"}, func(store.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if n := p.Commands(); n["UNWATCH"] != 1 {
		t.Errorf("commands of a Watch without EXEC: %v; want 1 UNWATCH", n)
	}
}
