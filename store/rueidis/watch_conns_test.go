package rueidis_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	rueidisstore "github.com/quotagate/limiter/store/rueidis"
)

// connectionsReceived reads the server's count of connections accepted.
func connectionsReceived(t *testing.T, st *rueidisstore.Store) int {
	t.Helper()
	rs, err := st.Do(context.Background(), store.Cmd{Name: "INFO", Args: []any{"stats"}})
	if err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	info, _ := store.String(rs[0].Val)
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_connections_received:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no total_connections_received in INFO stats: %q", info)
	return 0
}

// watchIncr runs one Watch that GETs key and INCRs it in MULTI/EXEC,
// calling inside (when not nil) first.
func watchIncr(ctx context.Context, st *rueidisstore.Store, key string, inside func(store.Tx)) error {
	return st.Watch(ctx, []string{key}, func(tx store.Tx) error {
		if inside != nil {
			inside(tx)
		}
		if _, err := tx.Do(ctx, store.Cmd{Name: "GET", Args: []any{key}}); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, store.Cmd{Name: "INCR", Args: []any{key}})
		return err
	})
}

// hammerWatch runs callers goroutines of n Watches each, on keys of their
// own, and returns the first error.
func hammerWatch(st *rueidisstore.Store, callers, n int) error {
	return hammerWatchKeys(st, callers, n, func(g, _ int) string { return fmt.Sprintf("w%d", g) })
}

// hammerWatchKeys is hammerWatch with caller g's Watch i on key(g, i).
func hammerWatchKeys(st *rueidisstore.Store, callers, n int, key func(g, i int) string) error {
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for g := range callers {
		wg.Go(func() {
			for i := range n {
				// a timeout that fits a loaded 2-core machine
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := watchIncr(ctx, st, key(g, i), nil)
				cancel()
				if err != nil {
					errs[g] = fmt.Errorf("caller %d, Watch %d: %w", g, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// TestWatchReusesConnections: a Store keeps the dedicated connections its
// Watches finished with for the next ones (it hands none back to rueidis,
// see TestWatchThenBusyServer), as many as were in use at once, so that
// 32 callers making 25 Watches each open about 32 connections, not one per
// Watch. (Kept up to a fixed 16, the other 16 callers dialed for each of
// their Watches: on a loaded machine over TLS, the dials stalled the
// transactions past their deadlines.)
func TestWatchReusesConnections(t *testing.T) {
	s := redistest.StartServer(t)
	st := newStore(t, s.Addr(), nil)
	const callers, n = 32, 25
	// what one dedicated connection costs the server in connections
	// (rueidis may open more than one for it)
	before := connectionsReceived(t, st)
	if err := watchIncr(context.Background(), st, "first", nil); err != nil {
		t.Fatal(err)
	}
	per := connectionsReceived(t, st) - before
	before += per
	if err := hammerWatch(st, callers, n); err != nil {
		t.Fatal(err)
	}
	made := connectionsReceived(t, st) - before
	// one per caller at most (the first Watch's among them), and a few
	// for the Watches whose connection was being made while another's
	// was handed on
	if want := (callers + 8) * per; made > want {
		t.Errorf("%d callers making %d Watches each opened %d connections (%d per dedicated connection); want at most %d (one per caller, and a few)", callers, n, made, per, want)
	}
	t.Logf("%d callers × %d Watches: %d connections, %d per dedicated connection", callers, n, made, per)
}

// TestWatchOnASmallPool: 8 callers on a client whose pool has 2 dedicated
// connections (BlockingPoolSize 2) all finish their Watches: a Watch
// waiting for rueidis to make a connection (which waits for a slot the
// Store's kept connections hold) takes the first one another Watch
// finishes with. And the Watches asking rueidis for a connection are no
// more than the callers waiting: those served meanwhile do not leave one
// more goroutine blocked in rueidis for each handed-on connection.
func TestWatchOnASmallPool(t *testing.T) {
	s := redistest.StartServer(t)
	st := newStore(t, s.Addr(), func(o *rueidis.ClientOption) { o.BlockingPoolSize = 2 })
	const callers, n = 8, 20
	if err := hammerWatch(st, callers, n); err != nil {
		t.Fatal(err)
	}
	first := runtime.NumGoroutine()
	for round := range 3 {
		if err := hammerWatch(st, callers, n); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	// (goroutines ending in the background settle)
	var now int
	for range 50 {
		if now = runtime.NumGoroutine(); now <= first+2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if now > first+2 {
		t.Errorf("goroutines after 3 more rounds of %d callers × %d Watches: %d, after the first round %d; want no more (one blocked in rueidis per handed-on connection?)", callers, n, now, first)
	}
}

// TestWatchAfterItsKeptConnectionDied: the connection a Store kept is
// killed on the server (an idle timeout, CLIENT KILL); the next Watch's
// WATCH fails on it and is tried again on a new connection, which a pool
// of one slot (BlockingPoolSize 1) must give it. The retry asked rueidis
// for one directly, behind the Store's own request still queued for the
// pool (made for a Watch served meanwhile): that one was kept, holding the
// only slot, and the retry waited forever.
func TestWatchAfterItsKeptConnectionDied(t *testing.T) {
	s := redistest.StartServer(t)
	st := newStore(t, s.Addr(), func(o *rueidis.ClientOption) { o.BlockingPoolSize = 1 })
	incr := func(ctx context.Context, key string, inside func(tx store.Tx)) error {
		return watchIncr(ctx, st, key, inside)
	}
	// A holds the only connection while B waits for one (asking rueidis,
	// whose pool is full), then A's connection goes to B.
	hold, in := make(chan struct{}), make(chan struct{})
	var id string
	aDone := make(chan error, 1)
	go func() {
		aDone <- incr(context.Background(), "a", func(tx store.Tx) { id = clientID(t, tx); close(in); <-hold })
	}()
	<-in
	bDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		bDone <- incr(ctx, "b", nil)
	}()
	time.Sleep(200 * time.Millisecond)
	close(hold)
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
	if r := do1(t, st, "CLIENT", "KILL", "ID", id); r.Err != nil {
		t.Fatal(r.Err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := incr(ctx, "c", nil); err != nil {
		t.Errorf("Watch after its kept connection was killed, on a pool of 1: %v; want success (WATCH tried again on a new connection)", err)
	}
}

// TestWatchAfterARestartOnASmallPool: the same after a restart of the
// server, which closes every kept connection, with 8 callers on a pool of
// two slots.
func TestWatchAfterARestartOnASmallPool(t *testing.T) {
	s := redistest.StartServer(t)
	st := newStore(t, s.Addr(), func(o *rueidis.ClientOption) { o.BlockingPoolSize = 2 })
	for round := range 3 {
		if err := hammerWatch(st, 8, 10); err != nil {
			t.Fatalf("round %d, before the restart: %v", round, err)
		}
		if err := s.Restart(); err != nil {
			t.Fatal(err)
		}
		if err := hammerWatch(st, 8, 10); err != nil {
			t.Fatalf("round %d, after the restart: %v", round, err)
		}
	}
}

// TestStaleTxSendsNothing: a Tx kept past its Watch (against the Tx
// contract) sends nothing: its connection, kept by the Store, may be
// another Watch's by then, whose WATCH the stale EXEC would clear, and
// that Watch would then miss another client's change.
func TestStaleTxSendsNothing(t *testing.T) {
	s := redistest.StartServer(t)
	st := newStore(t, s.Addr(), nil)
	ctx := context.Background()
	var stale store.Tx
	if err := st.Watch(ctx, []string{"first"}, func(tx store.Tx) error {
		stale = tx
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	do1(t, st, "SET", "k", "1")
	err := st.Watch(ctx, []string{"k"}, func(tx store.Tx) error {
		if _, err := tx.Do(ctx, store.Cmd{Name: "GET", Args: []any{"k"}}); err != nil {
			return err
		}
		do1(t, st, "SET", "k", "changed") // another client
		if rs, err := stale.Exec(ctx, store.Cmd{Name: "INCR", Args: []any{"other"}}); err == nil {
			t.Errorf("Exec of a Tx whose Watch returned: %v, no error; want it refused", rs)
		}
		_, err := tx.Exec(ctx, store.Cmd{Name: "SET", Args: []any{"k", "mine"}})
		return err
	})
	if !errors.Is(err, store.ErrTxAborted) {
		t.Errorf("Watch whose key another client changed: %v; want ErrTxAborted (k is now %v)", err, do1(t, st, "GET", "k").Val)
	}
	if v := do1(t, st, "GET", "other"); !errors.Is(v.Err, store.ErrNil) {
		t.Errorf("key the stale Tx's Exec would have set: %v, %v; want none", v.Val, v.Err)
	}
}

// TestWatchRetryTakesANewConnection: the server has closed the Store's
// connections (as a restart would; here CLIENT KILL of each). Watch B's
// WATCH fails on a kept one and is tried again; meanwhile Watch A, whose
// EXEC ran before the close, returns its (closed) connection. The retry
// must wait for a new connection, not take A's: it took it, its WATCH
// failed again, and B failed. (New connections are held back for a
// moment, as on a loaded machine or a slow TLS handshake.)
func TestWatchRetryTakesANewConnection(t *testing.T) {
	s := redistest.StartServer(t)
	var gate atomic.Bool
	open := make(chan struct{})
	var once sync.Once
	opened := func() { once.Do(func() { close(open) }) }
	t.Cleanup(opened)
	st := newStore(t, s.Addr(), func(o *rueidis.ClientOption) {
		o.DialCtxFn = func(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			if gate.Load() {
				<-open
			}
			return d.DialContext(ctx, "tcp", dst)
		}
	})
	ctx := context.Background()
	incr := func(ctx context.Context, key string, after func(tx store.Tx)) error {
		return st.Watch(ctx, []string{key}, func(tx store.Tx) error {
			_, err := tx.Exec(ctx, store.Cmd{Name: "INCR", Args: []any{key}})
			if err == nil && after != nil {
				after(tx)
			}
			return err
		})
	}
	// Two Watches at once, on keys of their own (one would abort the
	// other): the Store keeps two connections.
	var ids [2]string
	var both, wg sync.WaitGroup
	both.Add(2)
	for i := range 2 {
		wg.Go(func() {
			if err := incr(ctx, fmt.Sprintf("k%d", i), func(tx store.Tx) { ids[i] = clientID(t, tx); both.Done(); both.Wait() }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ids[0] == ids[1] {
		t.Fatalf("both Watches on connection %s", ids[0])
	}
	// A takes one kept connection and holds it after its EXEC.
	hold, in := make(chan struct{}), make(chan struct{})
	aDone := make(chan error, 1)
	go func() {
		aDone <- incr(ctx, "a", func(store.Tx) { close(in); <-hold })
	}()
	<-in
	for _, id := range ids {
		if r := do1(t, st, "CLIENT", "KILL", "ID", id); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	gate.Store(true)
	bDone := make(chan error, 1)
	go func() {
		bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		bDone <- incr(bctx, "b", nil)
	}()
	time.Sleep(300 * time.Millisecond) // B's WATCH failed on the other kept one: it waits
	close(hold)                        // A returns its closed connection
	if err := <-aDone; err != nil {
		t.Fatalf("Watch A (its EXEC ran before the close): %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	opened()
	if err := <-bDone; err != nil {
		t.Errorf("Watch B, tried again while Watch A returned its closed connection: %v; want success on a new connection", err)
	}
}
