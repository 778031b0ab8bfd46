package rueidis_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/redis/rueidis"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	rueidisstore "github.com/quotagate/limiter/store/rueidis"
)

// watchStore is a Store whose client has one dedicated connection
// (BlockingPoolSize 1), so every Watch runs on the same connection and a
// WATCH left behind by one would abort the next one's EXEC.
func watchStore(t *testing.T, addr string) *rueidisstore.Store {
	t.Helper()
	return newStore(t, addr, func(o *rueidis.ClientOption) { o.BlockingPoolSize = 1 })
}

// clientID returns the id of the connection tx is pinned to, or "" when
// the server has no CLIENT ID.
func clientID(t *testing.T, tx store.Tx) string {
	t.Helper()
	rs, err := tx.Do(context.Background(), store.Cmd{Name: "CLIENT", Args: []any{"ID"}})
	if err != nil {
		t.Fatalf("CLIENT ID: %v", err)
	}
	if rs[0].Err != nil {
		return ""
	}
	id, _ := store.String(rs[0].Val)
	return id
}

// Watch, a concurrent change of the key, Exec: ErrTxAborted, and nothing of
// the transaction ran.
func TestWatchAbortsOnConcurrentChange(t *testing.T) {
	backends(t, func(t *testing.T, addr string) {
		st := watchStore(t, addr)
		ctx := context.Background()
		do1(t, st, "SET", "{w}:k", "1")
		var execErr error
		err := st.Watch(ctx, []string{"{w}:k"}, func(tx store.Tx) error {
			rs, err := tx.Do(ctx, store.Cmd{Name: "GET", Args: []any{"{w}:k"}})
			if err != nil || rs[0].Val != "1" {
				t.Fatalf("GET on the watched connection = %v, %v", rs, err)
			}
			do1(t, st, "SET", "{w}:k", "2") // another connection
			_, execErr = tx.Exec(ctx, store.Cmd{Name: "SET", Args: []any{"{w}:k", "3"}})
			return execErr
		})
		if !errors.Is(execErr, store.ErrTxAborted) || !errors.Is(err, store.ErrTxAborted) {
			t.Fatalf("Exec after a concurrent change = %v (Watch returned %v); want ErrTxAborted", execErr, err)
		}
		if v := do1(t, st, "GET", "{w}:k").Val; v != "2" {
			t.Errorf("after an aborted transaction the key is %v, want 2", v)
		}
	})
}

// After Watch returns — fn's error, fn's nil without EXEC, a panic in fn,
// an EXEC — the connection is un-watched: on the same connection, a
// transaction on another key succeeds although the first key has changed
// since.
func TestWatchLeavesConnectionUnwatched(t *testing.T) {
	backends(t, func(t *testing.T, addr string) {
		st := watchStore(t, addr)
		ctx := context.Background()
		errFn := errors.New("fn failed")
		exits := []struct {
			name string
			fn   func(tx store.Tx) error
			want error // what Watch returns
		}{
			{"error", func(store.Tx) error { return errFn }, errFn},
			{"nil-without-exec", func(store.Tx) error { return nil }, nil},
			{"panic", func(store.Tx) error { panic(errFn) }, nil},
			{"exec", func(tx store.Tx) error {
				_, err := tx.Exec(ctx, store.Cmd{Name: "INCR", Args: []any{"{w}:other"}})
				return err
			}, nil},
			{"watch-more-in-do", func(tx store.Tx) error {
				_, err := tx.Do(ctx, store.Cmd{Name: "WATCH", Args: []any{"{w}:k2"}})
				return err
			}, nil},
		}
		for _, ex := range exits {
			t.Run(ex.name, func(t *testing.T) {
				do1(t, st, "SET", "{w}:k", "1")
				var firstID string
				func() {
					defer func() {
						if p := recover(); p != nil && p != errFn {
							panic(p)
						}
					}()
					err := st.Watch(ctx, []string{"{w}:k"}, func(tx store.Tx) error {
						firstID = clientID(t, tx)
						return ex.fn(tx)
					})
					if !errors.Is(err, ex.want) || (ex.want == nil && err != nil) {
						t.Fatalf("Watch = %v, want %v", err, ex.want)
					}
				}()
				// Change the key the first Watch watched, then run a
				// transaction on the (same) connection.
				do1(t, st, "SET", "{w}:k", "changed")
				do1(t, st, "SET", "{w}:k2", "changed")
				var rs []store.Reply
				err := st.Watch(ctx, []string{"{w}:fresh"}, func(tx store.Tx) error {
					if id := clientID(t, tx); id != firstID {
						t.Fatalf("the second Watch ran on connection %s, the first on %s: the test proves nothing", id, firstID)
					}
					var err error
					rs, err = tx.Exec(ctx,
						store.Cmd{Name: "SET", Args: []any{"{w}:fresh", "v"}},
						store.Cmd{Name: "GET", Args: []any{"{w}:fresh"}})
					return err
				})
				if err != nil {
					t.Fatalf("a transaction after Watch exited by %s = %v; want success (the connection kept its WATCH)", ex.name, err)
				}
				if !reflect.DeepEqual(rs, []store.Reply{{Val: "OK"}, {Val: "v"}}) {
					t.Errorf("Exec replies = %+v", rs)
				}
			})
		}
	})
}

// Exec's replies are normalised, with each command's error in its Reply;
// commands that would upset the pinned connection are refused.
func TestTxReplies(t *testing.T) {
	backends(t, func(t *testing.T, addr string) {
		st := watchStore(t, addr)
		ctx := context.Background()
		do1(t, st, "SET", "{w}:s", "text")
		err := st.Watch(ctx, []string{"{w}:s"}, func(tx store.Tx) error {
			if _, err := tx.Do(ctx, store.Cmd{Name: "MULTI"}); err == nil {
				t.Error("Tx.Do(MULTI): no error")
			}
			if _, err := tx.Exec(ctx, store.Cmd{Name: "exec"}); err == nil {
				t.Error("Tx.Exec(EXEC): no error")
			}
			rs, err := tx.Exec(ctx,
				store.Cmd{Name: "INCR", Args: []any{"{w}:s"}},
				store.Cmd{Name: "GET", Args: []any{"{w}:missing"}},
				store.Cmd{Name: "RPUSH", Args: []any{"{w}:l", "a", int64(1234)}},
				store.Cmd{Name: "LRANGE", Args: []any{"{w}:l", 0, -1}},
			)
			if err != nil {
				return err
			}
			var re *rueidis.RedisError
			if len(rs) != 4 || !errors.As(rs[0].Err, &re) || !errors.Is(rs[1].Err, store.ErrNil) ||
				rs[2].Val != int64(2) || !reflect.DeepEqual(rs[3].Val, []any{"a", "1234"}) {
				t.Errorf("Exec replies = %+v", rs)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// A command refused while queued fails the whole EXEC (EXECABORT).
		err = st.Watch(ctx, []string{"{w}:s"}, func(tx store.Tx) error {
			_, err := tx.Exec(ctx, store.Cmd{Name: "SET", Args: []any{"{w}:s"}}) // wrong arity
			return err
		})
		if err == nil || errors.Is(err, store.ErrTxAborted) {
			t.Errorf("EXEC with a refused command = %v; want the server's error", err)
		}
		if err := st.Watch(ctx, nil, func(store.Tx) error { return nil }); err == nil {
			t.Error("Watch without keys: no error")
		}
	})
}

// A dedicated connection that the server closed (a restart) fails its
// WATCH once; Watch takes a fresh connection and goes on.
func TestWatchAfterRestart(t *testing.T) {
	srv := redistest.StartServer(t)
	st := watchStore(t, srv.Addr())
	ctx := context.Background()
	run := func() error {
		return st.Watch(ctx, []string{"{w}:k"}, func(tx store.Tx) error {
			_, err := tx.Exec(ctx, store.Cmd{Name: "INCR", Args: []any{"{w}:k"}})
			return err
		})
	}
	if err := run(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := run(); err != nil {
		t.Fatalf("Watch after a restart = %v", err)
	}
	if v := do1(t, st, "GET", "{w}:k").Val; v != "1" {
		t.Errorf("after a restart and one transaction the key is %v, want 1", v)
	}
}
