package goredis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// review1Exists reports whether key exists, read with a client of its own.
func review1Exists(t *testing.T, addr, key string) bool {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	n, err := c.Exists(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// A WATCH whose reply is lost after it was written fails with
// store.ErrUnknownOutcome (goredis.go, Watch: "Like any command given up on
// after it may have been written, its outcome is unknown"), and fn is not
// called.
func TestWatchLostReplyIsUnknown(t *testing.T) {
	srv := redistest.StartServer(t)
	px := redistest.NewProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	st := goredis.New(rdb)
	ctx := context.Background()
	if _, err := st.Do(ctx, store.Cmd{Name: "PING"}); err != nil {
		t.Fatal(err)
	}
	px.DropReply("WATCH")
	called := false
	err := st.Watch(ctx, []string{"k"}, func(store.Tx) error { called = true; return nil })
	if px.Disarm() {
		t.Fatal("the WATCH was never sent")
	}
	if called || !errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("Watch whose WATCH reply was lost = %v (fn called: %v); want store.ErrUnknownOutcome, fn not called", err, called)
	}
}

// A Watch on a closed client sends nothing: its error is the client's
// ErrClosed, not store.ErrUnknownOutcome (notSent).
func TestWatchOnClosedClientIsKnown(t *testing.T) {
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	st := goredis.New(rdb)
	_ = rdb.Close()
	called := false
	err := st.Watch(context.Background(), []string{"k"}, func(store.Tx) error { called = true; return nil })
	if called || err == nil || !errors.Is(err, redis.ErrClosed) || errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("Watch on a closed client = %v (fn called: %v); want redis.ErrClosed, not store.ErrUnknownOutcome", err, called)
	}
}

// A Watch given up on (its context cancelled) after its EXEC was written
// fails with store.ErrUnknownOutcome: the transaction may have run
// (watchState.abandon). The EXEC's reply is held back by the proxy, and
// the context is cancelled once the EXEC has reached the server.
func TestWatchAbandonedAfterExecIsUnknown(t *testing.T) {
	srv := redistest.StartServer(t)
	px := redistest.NewProxy(t, srv.Addr())
	// no ContextTimeoutEnabled: the adapter bounds the Watch by ctx
	rdb := redis.NewClient(&redis.Options{Addr: px.Addr(), MaxRetries: -1, ReadTimeout: 20 * time.Second})
	t.Cleanup(func() { px.Delay(0); _ = rdb.Close() })
	st := goredis.New(rdb)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	px.ResetCounts()
	go func() {
		for px.Commands()["EXEC"] == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	err := st.Watch(ctx, []string{"k"}, func(tx store.Tx) error {
		if _, err := tx.Do(ctx, store.Cmd{Name: "GET", Args: []any{"k"}}); err != nil {
			return err
		}
		px.Delay(15 * time.Second) // the EXEC's reply comes after ctx ends
		_, err := tx.Exec(ctx, store.Cmd{Name: "INCR", Args: []any{"k"}})
		return err
	})
	if !errors.Is(err, store.ErrUnknownOutcome) || !errors.Is(err, context.Canceled) {
		t.Errorf("Watch given up after its EXEC was written = %v; want store.ErrUnknownOutcome and context.Canceled", err)
	}
}

// Once a Watch has been given up on, its Tx sends no EXEC, even under a
// context that is not done (watchState.sending): the caller was told the
// call failed without running.
func TestExecAfterAbandonSendsNothing(t *testing.T) {
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	st := goredis.New(rdb)
	ctx, cancel := context.WithCancel(context.Background())
	started, proceed := make(chan struct{}), make(chan struct{})
	execErr := make(chan error, 1)
	var werr error
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		werr = st.Watch(ctx, []string{"k"}, func(tx store.Tx) error {
			close(started)
			<-proceed
			_, err := tx.Exec(context.Background(), store.Cmd{Name: "INCR", Args: []any{"k"}})
			execErr <- err
			return err
		})
	}()
	<-started
	cancel()
	<-watchDone
	if !errors.Is(werr, context.Canceled) || errors.Is(werr, store.ErrUnknownOutcome) {
		t.Errorf("Watch given up before any EXEC = %v; want context.Canceled, not store.ErrUnknownOutcome", werr)
	}
	close(proceed)
	err := <-execErr
	if err == nil || review1Exists(t, srv.Addr(), "k") {
		t.Errorf("Tx.Exec after the Watch was given up = %v, k exists: %v; want an error and nothing run", err, review1Exists(t, srv.Addr(), "k"))
	}
}

// A Tx's Do and Exec under a context already done send nothing and are
// not store.ErrUnknownOutcome (txn.Do, txn.Exec: "nothing sent"), also
// when go-redis itself honours deadlines (the adapter does not bound the
// Watch then).
func TestTxDoneContextSendsNothing(t *testing.T) {
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	st := goredis.New(rdb)
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
		if review1Exists(t, srv.Addr(), "k") {
			t.Fatalf("exec=%v: Tx call with a done ctx ran its INCR", exec)
		}
	}
}

// A WATCH that a Cluster node keeps refusing with TRYAGAIN (the watched
// keys split by a slot's migration that does not end) is
// store.ErrTryAgain (mapErr), not an unknown outcome, and fn is not
// called.
func TestWatchTryAgainOutlastedIsErrTryAgain(t *testing.T) {
	cl := redistest.StartCluster(t)
	addrs := cl.Addrs()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	st := goredis.New(rdb)
	k1, k2 := "{r1}a", "{r1}b"
	from := -1
	ids := make([]string, len(addrs))
	for i, a := range addrs {
		if _, err := clusterNode(t, a, "GET", k1); err == nil {
			from = i
		}
		id, _ := redigoString(clusterNode(t, a, "CLUSTER", "MYID"))
		ids[i] = id
	}
	to := (from + 1) % len(addrs)
	clusterNode(t, addrs[from], "MSET", k1, "1", k2, "1")
	slot := store.KeySlot(k1)
	host, port, _ := strings.Cut(addrs[to], ":")
	clusterNode(t, addrs[to], "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[from])
	clusterNode(t, addrs[from], "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to])
	if _, err := clusterNode(t, addrs[from], "MIGRATE", host, port, "", 0, 5000, "KEYS", k1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	called := false
	err := st.Watch(ctx, []string{k1, k2}, func(store.Tx) error { called = true; return nil })
	if called || !errors.Is(err, store.ErrTryAgain) || errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("Watch of keys split by a migration that never ends = %v (fn called: %v); want store.ErrTryAgain, fn not called", err, called)
	}
}

func redigoString(v any, err error) (string, error) {
	if err != nil {
		return "", err
	}
	b, _ := v.([]byte)
	return string(b), nil
}
