package rueidis_test

import (
	"context"
	"errors"
	"testing"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
)

// Replies inside arrays: a nil element is nil, an error element is the
// adapter's error with NOSCRIPT as store.ErrNoScript (store contract).
func TestArrayElements(t *testing.T) {
	srv := redistest.StartServer(t)
	st := newStore(t, srv.Addr(), nil)
	ctx := context.Background()
	rs, err := st.Do(ctx, store.Cmd{Name: "SET", Args: []any{"a", "v"}}, store.Cmd{Name: "MGET", Args: []any{"a", "missing"}})
	if err != nil {
		t.Fatal(err)
	}
	arr, err := store.Slice(rs[1].Val)
	if err != nil || len(arr) != 2 || arr[0] != "v" || arr[1] != nil {
		t.Errorf("MGET = %#v, %v; want [v <nil>]", rs[1].Val, err)
	}
	rs, err = st.Do(ctx,
		store.Cmd{Name: "MULTI"},
		store.Cmd{Name: "EVALSHA", Args: []any{"0000000000000000000000000000000000000000", 0}},
		store.Cmd{Name: "EXEC"})
	if err != nil {
		t.Fatal(err)
	}
	arr, err = store.Slice(rs[2].Val)
	if err != nil || len(arr) != 1 {
		t.Fatalf("EXEC = %#v, %v", rs[2], err)
	}
	if e, ok := arr[0].(error); !ok || !errors.Is(e, store.ErrNoScript) {
		t.Errorf("EXEC's NOSCRIPT element = %#v; want an error wrapping store.ErrNoScript", arr[0])
	}
}
