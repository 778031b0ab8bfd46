package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter/store"
)

type instant struct{ store.Store }

func (instant) Do(context.Context, ...store.Cmd) ([]store.Reply, error) {
	return []store.Reply{{Val: "OK"}}, nil
}
func (instant) EvalSha(context.Context, string, []string, []any) (any, error) { return int64(1), nil }
func (instant) Eval(context.Context, string, []string, []any) (any, error)    { return int64(2), nil }

type watching struct{ instant }

func (watching) Watch(_ context.Context, _ []string, fn func(store.Tx) error) error { return fn(nil) }

// TestLate: every call's reply comes back at least delay late, unchanged,
// and a Watcher stays one.
func TestLate(t *testing.T) {
	const delay = 20 * time.Millisecond
	ctx := context.Background()
	st := Late(instant{}, delay)
	if _, ok := st.(store.Watcher); ok {
		t.Error("a store that does not pin connections became a Watcher")
	}
	for name, call := range map[string]func() (any, error){
		"Do":      func() (any, error) { rs, err := st.Do(ctx, store.Cmd{Name: "PING"}); return rs[0].Val, err },
		"EvalSha": func() (any, error) { return st.EvalSha(ctx, "sha", nil, nil) },
		"Eval":    func() (any, error) { return st.Eval(ctx, "src", nil, nil) },
	} {
		start := time.Now()
		v, err := call()
		if took := time.Since(start); took < delay || err != nil || v == nil {
			t.Errorf("%s: %v, %v after %s; want a reply after at least %s", name, v, err, took, delay)
		}
	}
	w, ok := Late(watching{}, delay).(store.Watcher)
	if !ok {
		t.Fatal("a Watcher lost Watch")
	}
	ran := false
	start := time.Now()
	if err := w.Watch(ctx, []string{"k"}, func(store.Tx) error { ran = true; return nil }); err != nil || !ran || time.Since(start) < delay {
		t.Errorf("Watch: %v, ran %v after %s", err, ran, time.Since(start))
	}
}
