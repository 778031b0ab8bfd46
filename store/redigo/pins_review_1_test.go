package redigo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/redigo"
)

// A Watch whose context is already done sends nothing, does not call fn,
// and is not store.ErrUnknownOutcome (watch.go, Watch).
func TestWatchDoneContextIsKnown(t *testing.T) {
	_, p := server(t, 2)
	st := redigo.New(p)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	err := st.Watch(ctx, []string{"k"}, func(store.Tx) error { called = true; return nil })
	if called || !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("Watch with a done ctx = %v (fn called: %v); want context.Canceled, not store.ErrUnknownOutcome, fn not called", err, called)
	}
}

// Lost replies in a Watch are store.ErrUnknownOutcome: the WATCH's
// (watch.go: "Written, reply lost: as for any command"), and that of a
// command fn sends through Tx.Do, which ran.
func TestWatchLostRepliesAreUnknown(t *testing.T) {
	srv := redistest.StartServer(t)
	px := redistest.NewProxy(t, srv.Addr())
	p := newPool(px.Addr(), 2)
	t.Cleanup(func() { _ = p.Close() })
	st := redigo.New(p)
	ctx := context.Background()

	px.DropReply("WATCH")
	called := false
	err := st.Watch(ctx, []string{"k"}, func(store.Tx) error { called = true; return nil })
	if px.Disarm() {
		t.Fatal("the WATCH was never sent")
	}
	if called || !errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("Watch whose WATCH reply was lost = %v (fn called: %v); want store.ErrUnknownOutcome, fn not called", err, called)
	}

	var doErr error
	_ = st.Watch(ctx, []string{"k"}, func(tx store.Tx) error {
		px.DropReply("INCR")
		_, doErr = tx.Do(ctx, store.Cmd{Name: "INCR", Args: []any{"n"}})
		return doErr
	})
	if px.Disarm() {
		t.Fatal("the INCR was never sent")
	}
	n, _ := redis.Int(node(t, srv.Addr(), "GET", "n"), nil)
	if n != 1 || !errors.Is(doErr, store.ErrUnknownOutcome) {
		t.Errorf("Tx.Do whose INCR reply was lost = %v, and the INCR ran %d times; want store.ErrUnknownOutcome, and 1", doErr, n)
	}
}

// A Tx's Do and Exec under a context already done send nothing and are
// not store.ErrUnknownOutcome (txn.usable: "nothing is written then").
func TestTxDoneContextSendsNothing(t *testing.T) {
	srv, p := server(t, 2)
	st := redigo.New(p)
	for _, exec := range []bool{true, false} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var txErr error
		_ = st.Watch(ctx, []string{"w"}, func(tx store.Tx) error {
			cancel()
			if exec {
				_, txErr = tx.Exec(ctx, store.Cmd{Name: "INCR", Args: []any{"k"}})
			} else {
				_, txErr = tx.Do(ctx, store.Cmd{Name: "INCR", Args: []any{"k"}})
			}
			return txErr
		})
		cancel()
		if !errors.Is(txErr, context.Canceled) || errors.Is(txErr, store.ErrUnknownOutcome) {
			t.Errorf("exec=%v: Tx call with a done ctx = %v; want context.Canceled, not store.ErrUnknownOutcome", exec, txErr)
		}
		if v := node(t, srv.Addr(), "GET", "k"); v != nil {
			t.Fatalf("exec=%v: Tx call with a done ctx ran its INCR (k = %s)", exec, v)
		}
	}
}

// A WATCH that a Cluster node keeps refusing with TRYAGAIN (the watched
// keys split by a slot's migration that does not end) until the call's
// pauses run out is store.ErrTryAgain (store.ErrTryAgain: "refused ...
// not run"), and fn is not called.
func TestWatchTryAgainOutlastedIsErrTryAgain(t *testing.T) {
	cl := redistest.StartCluster(t)
	addrs := cl.Addrs()
	st := redigo.New(redigo.Cluster(newCluster(t, addrs)))
	k1, k2 := "{r1}a", "{r1}b"
	splitSlot(t, addrs, k1, k2) // never finished
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	called := false
	err := st.Watch(ctx, []string{k1, k2}, func(store.Tx) error { called = true; return nil })
	if called || !errors.Is(err, store.ErrTryAgain) || errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("Watch of keys split by a migration that never ends = %v (fn called: %v); want store.ErrTryAgain, fn not called", err, called)
	}
}
