package rueidis_test

import (
	"context"
	"errors"
	"testing"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
)

// EvalShaInt64s (every FixedWindow decision) with a done context sends
// nothing and is not an unknown outcome (doc: "Errors before anything is
// sent (a context already done, ...) do not").
func TestInt64sDoneContext(t *testing.T) {
	m := redistest.NewMini(t)
	p := redistest.NewProxy(t, m.Addr())
	st := newStore(t, p.Addr(), nil)
	s := store.NewScript(`return redis.call("INCR", KEYS[1])`)
	if _, err := s.RunInt64s(context.Background(), st, []string{"warm"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.ResetCounts()
	_, err := st.EvalShaInt64s(ctx, s.Hash(), []string{"k"}, nil, nil)
	if !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("EvalShaInt64s with a done ctx = %v; want Canceled, not ErrUnknownOutcome", err)
	}
	if n := p.Commands(); n["EVALSHA"] != 0 {
		t.Errorf("commands reached the server: %v", n)
	}
}

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

// A Batch whose context is already done sends nothing: each command's Err
// is the context's error, not an unknown outcome (store.Batcher: the
// round trip's failure "wraps ErrUnknownOutcome when the command may have
// run"; package doc: "Errors before anything is sent (a context already
// done, ...) do not").
func TestBatchDoneContext(t *testing.T) {
	m := redistest.NewMini(t)
	p := redistest.NewProxy(t, m.Addr())
	st := newStore(t, p.Addr(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.ResetCounts()
	out := st.Batch(ctx, []store.Cmd{{Name: "INCR", Args: []any{"a"}}, {Name: "INCR", Args: []any{"b"}}})
	for i, r := range out {
		if !errors.Is(r.Err, context.Canceled) || errors.Is(r.Err, store.ErrUnknownOutcome) {
			t.Errorf("Batch with a done ctx: reply %d = %v; want Canceled, not ErrUnknownOutcome", i, r.Err)
		}
	}
	if n := p.Commands(); n["INCR"] != 0 {
		t.Errorf("commands reached the server: %v", n)
	}
}
