package goredis_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// uncomparableErr is an error whose dynamic type cannot be compared with
// ==.
type uncomparableErr []string

func (e uncomparableErr) Error() string { return "uncomparable: " + e[0] }

// Watch, on the path that bounds it by its context (a cancellable one,
// with go-redis's ContextTimeoutEnabled and no deadline, as an HTTP
// request's): a panic in fn reaches the caller, who recovers it (it ended
// the process from the goroutine fn ran on, sometimes after Watch had
// returned nil); fn's error is returned whatever its type (one of a slice
// type made Watch panic); and a WATCH that fn sent through Tx.Do is
// un-watched before the connection goes back to the pool (the next
// transaction on it aborted, for a key it never watched).
func TestWatchExits(t *testing.T) {
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 1, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	st := goredis.New(rdb)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var recovered any
	func() {
		defer func() { recovered = recover() }()
		_ = st.Watch(ctx, []string{"a"}, func(store.Tx) error { panic("boom") })
	}()
	if recovered != "boom" {
		t.Errorf("a panic in fn: the caller recovered %v; want boom", recovered)
	}

	err := st.Watch(ctx, []string{"a"}, func(store.Tx) error { return uncomparableErr{"x"} })
	if ue := (uncomparableErr{}); !errors.As(err, &ue) {
		t.Errorf("Watch whose fn returns an error of a slice type = %v; want that error", err)
	}

	other := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = other.Close() })
	err = st.Watch(ctx, []string{"a"}, func(tx store.Tx) error {
		if _, err := tx.Exec(ctx, store.Cmd{Name: "SET", Args: []any{"a", "1"}}); err != nil {
			return err
		}
		// after EXEC, which un-watched a: a WATCH of fn's own
		_, err := tx.Do(ctx, store.Cmd{Name: "WATCH", Args: []any{"a"}}, store.Cmd{Name: "GET", Args: []any{"a"}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Set(ctx, "a", "changed", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// the pool's one connection, next: a Watch of b, which nobody changes,
	// and a MULTI/EXEC through Do (Bucketed's)
	err = st.Watch(ctx, []string{"b"}, func(tx store.Tx) error {
		_, err := tx.Exec(ctx, store.Cmd{Name: "INCR", Args: []any{"b"}})
		return err
	})
	if err != nil {
		t.Errorf("a Watch of b after fn watched a through Tx.Do = %v; want committed", err)
	}
	if err := st.Watch(ctx, nil, func(tx store.Tx) error {
		_, err := tx.Do(ctx, store.Cmd{Name: "WATCH", Args: []any{"a"}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := other.Set(ctx, "a", "changed again", 0).Err(); err != nil {
		t.Fatal(err)
	}
	rs, err := st.Do(ctx, store.Cmd{Name: "MULTI"}, store.Cmd{Name: "INCR", Args: []any{"c"}}, store.Cmd{Name: "EXEC"})
	if err != nil || rs[len(rs)-1].Err != nil {
		t.Errorf("MULTI/INCR/EXEC after a Watch with no keys whose fn watched a = %+v, %v; want committed", rs, err)
	}
}
