package store_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/quotagate/limiter/store"
)

func TestReplyHelpers(t *testing.T) {
	if n, err := store.Int64(int64(7)); n != 7 || err != nil {
		t.Errorf("Int64(7) = %d, %v", n, err)
	}
	if n, err := store.Int64("-12"); n != -12 || err != nil {
		t.Errorf(`Int64("-12") = %d, %v`, n, err)
	}
	if _, err := store.Int64(nil); !errors.Is(err, store.ErrNil) {
		t.Errorf("Int64(nil) = %v, want ErrNil", err)
	}
	for _, bad := range []any{"x", 1.5, []any{}} {
		if _, err := store.Int64(bad); err == nil {
			t.Errorf("Int64(%#v): no error", bad)
		}
	}
	if s, err := store.String(int64(3)); s != "3" || err != nil {
		t.Errorf("String(3) = %q, %v", s, err)
	}
	if _, err := store.String(nil); !errors.Is(err, store.ErrNil) {
		t.Errorf("String(nil) = %v", err)
	}
	if _, err := store.Slice("x"); err == nil {
		t.Error("Slice(string): no error")
	}
	if ns, err := store.Int64s([]any{int64(1), "2"}); err != nil || !reflect.DeepEqual(ns, []int64{1, 2}) {
		t.Errorf("Int64s = %v, %v", ns, err)
	}
	if _, err := store.Int64s([]any{int64(1), "x"}); err == nil {
		t.Error("Int64s with a non-integer: no error")
	}
}

// fake answers EVALSHA with NOSCRIPT until Eval has run once.
type fake struct {
	store.Store
	loaded          bool
	evalsha, evals  int
	evalshaFailWith error
}

func (f *fake) EvalSha(_ context.Context, sha string, _ []string, _ []any) (any, error) {
	f.evalsha++
	if f.evalshaFailWith != nil {
		return nil, f.evalshaFailWith
	}
	if !f.loaded {
		return nil, store.ErrNoScript
	}
	return "sha:" + sha, nil
}

func (f *fake) Eval(context.Context, string, []string, []any) (any, error) {
	f.evals++
	f.loaded = true
	return "eval", nil
}

func TestScriptFallsBackOnceOnNoScript(t *testing.T) {
	s := store.NewScript("return 1")
	if s.Hash() != "e0e1f9fabfc9d4800c877a703b823ac0578ff8db" || s.Source() != "return 1" {
		t.Fatalf("Hash = %s", s.Hash())
	}
	f := &fake{}
	ctx := context.Background()
	if v, err := s.Run(ctx, f, nil, nil); v != "eval" || err != nil || f.evals != 1 {
		t.Fatalf("first Run = %v, %v (evals %d)", v, err, f.evals)
	}
	if v, err := s.Run(ctx, f, nil, nil); v != "sha:"+s.Hash() || err != nil || f.evals != 1 {
		t.Fatalf("second Run = %v, %v (evals %d)", v, err, f.evals)
	}
	// A lost reply is never followed by EVAL: the script may have run.
	f.evalshaFailWith = store.ErrUnknownOutcome
	if _, err := s.Run(ctx, f, nil, nil); !errors.Is(err, store.ErrUnknownOutcome) || f.evals != 1 {
		t.Fatalf("Run after a lost reply = %v (evals %d)", err, f.evals)
	}
}

// intFake is an Int64sEvaler that answers NOSCRIPT until EvalInt64s has
// run once; its plain EvalSha and Eval must never be used.
type intFake struct {
	fake
	ints, intEvals int
	lastArgs       []int64
}

func (f *intFake) EvalShaInt64s(_ context.Context, _ string, _ []string, args []int64, dst []int64) ([]int64, error) {
	f.ints++
	if f.evalshaFailWith != nil {
		return nil, f.evalshaFailWith
	}
	if !f.loaded {
		return nil, store.ErrNoScript
	}
	f.lastArgs = args
	return append(dst, args...), nil
}

func (f *intFake) EvalInt64s(_ context.Context, _ string, _ []string, args []int64, dst []int64) ([]int64, error) {
	f.intEvals++
	f.loaded = true
	return append(dst, -1), nil
}

func TestRunInt64s(t *testing.T) {
	ctx := context.Background()
	s := store.NewScript("return 1")

	// An Int64sEvaler: its own calls, the same NOSCRIPT fallback, dst kept.
	f := &intFake{}
	dst := []int64{9}
	if got, err := s.RunInt64s(ctx, f, nil, []int64{5, 6}, dst); err != nil || !reflect.DeepEqual(got, []int64{9, -1}) || f.intEvals != 1 {
		t.Fatalf("first RunInt64s = %v, %v (EvalInt64s %d)", got, err, f.intEvals)
	}
	if got, err := s.RunInt64s(ctx, f, nil, []int64{5, 6}, dst); err != nil || !reflect.DeepEqual(got, []int64{9, 5, 6}) || f.intEvals != 1 {
		t.Fatalf("second RunInt64s = %v, %v (EvalInt64s %d)", got, err, f.intEvals)
	}
	if f.evalsha != 0 || f.evals != 0 {
		t.Errorf("the generic EvalSha/Eval ran %d/%d times on an Int64sEvaler", f.evalsha, f.evals)
	}
	f.evalshaFailWith = store.ErrUnknownOutcome
	if _, err := s.RunInt64s(ctx, f, nil, nil, nil); !errors.Is(err, store.ErrUnknownOutcome) || f.intEvals != 1 {
		t.Fatalf("RunInt64s after a lost reply = %v (EvalInt64s %d)", err, f.intEvals)
	}

	// A plain Store: arguments as int64 values, the reply converted.
	p := &argsFake{reply: []any{int64(1), "2", int64(-3)}}
	got, err := s.RunInt64s(ctx, p, []string{"k"}, []int64{7, 1 << 40}, []int64{0})
	if err != nil || !reflect.DeepEqual(got, []int64{0, 1, 2, -3}) {
		t.Fatalf("RunInt64s on a plain store = %v, %v", got, err)
	}
	if !reflect.DeepEqual(p.args, []any{int64(7), int64(1 << 40)}) {
		t.Errorf("plain store got args %#v", p.args)
	}
	for _, bad := range []any{[]any{int64(1), nil}, []any{"x"}, "OK", nil} {
		p.reply = bad
		if got, err := s.RunInt64s(ctx, p, nil, nil, nil); err == nil {
			t.Errorf("RunInt64s of reply %#v = %v, nil error", bad, got)
		}
	}
}

// argsFake records EvalSha's arguments and answers with reply.
type argsFake struct {
	store.Store
	args  []any
	reply any
}

func (f *argsFake) EvalSha(_ context.Context, _ string, _ []string, args []any) (any, error) {
	f.args = args
	return f.reply, nil
}

// TestCmdKey: a command's first key, by which a Cluster adapter routes it.
func TestCmdKey(t *testing.T) {
	for _, tc := range []struct {
		cmd  store.Cmd
		want string
	}{
		{store.Cmd{Name: "INCRBY", Args: []any{"k", 1}}, "k"},
		{store.Cmd{Name: "get", Args: []any{[]byte("b")}}, "b"},
		{store.Cmd{Name: "EVALSHA", Args: []any{"sha", 2, "k1", "k2", "a"}}, "k1"},
		{store.Cmd{Name: "EVAL", Args: []any{"return 1", "1", "k"}}, "k"},
		{store.Cmd{Name: "EVAL", Args: []any{"return 1", 0}}, ""},
		{store.Cmd{Name: "EVALSHA", Args: []any{"sha", int64(0), "a"}}, ""},
		{store.Cmd{Name: "PING"}, ""},
		{store.Cmd{Name: "TIME"}, ""},
		{store.Cmd{Name: "SCRIPT", Args: []any{"LOAD", "return 1"}}, ""},
		{store.Cmd{Name: "OBJECT", Args: []any{"ENCODING", "k"}}, "k"},
		{store.Cmd{Name: "ZUNION", Args: []any{2, "a", "b"}}, "a"},
		{store.Cmd{Name: "SET", Args: []any{42, "v"}}, ""}, // a key that is not text
	} {
		if got := tc.cmd.Key(); got != tc.want {
			t.Errorf("%s %v: Key() = %q, want %q", tc.cmd.Name, tc.cmd.Args, got, tc.want)
		}
	}
}

// TestGroup: indexes grouped by key, groups in the order of their first
// command.
func TestGroup(t *testing.T) {
	cmds := []store.Cmd{{Name: "GET", Args: []any{"b1"}}, {Name: "GET", Args: []any{"a1"}}, {Name: "GET", Args: []any{"b2"}}, {Name: "PING"}}
	got := store.Group(cmds, func(c store.Cmd) string {
		if k := c.Key(); k != "" {
			return k[:1]
		}
		return ""
	})
	if want := [][]int{{0, 2}, {1}, {3}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Group = %v, want %v", got, want)
	}
}

// noScriptFake answers every EVALSHA and every EVAL with NOSCRIPT (as a
// script whose own error reply begins "NOSCRIPT" does: the adapters map
// it to ErrNoScript), plain and integer calls alike.
type noScriptFake struct {
	store.Store
	evals int
}

func (f *noScriptFake) EvalSha(context.Context, string, []string, []any) (any, error) {
	return nil, store.ErrNoScript
}

func (f *noScriptFake) Eval(context.Context, string, []string, []any) (any, error) {
	f.evals++
	if f.evals > 5 {
		return nil, errors.New("stop: EVAL sent again and again")
	}
	return nil, store.ErrNoScript
}

func (f *noScriptFake) EvalShaInt64s(context.Context, string, []string, []int64, []int64) ([]int64, error) {
	return nil, store.ErrNoScript
}

func (f *noScriptFake) EvalInt64s(ctx context.Context, src string, keys []string, _ []int64, _ []int64) ([]int64, error) {
	_, err := f.Eval(ctx, src, keys, nil)
	return nil, err
}

// NOSCRIPT is answered with EVAL once: an EVAL answered NOSCRIPT too (the
// script's own error) is the call's error, never sent again (the script
// ran each time).
func TestScriptEvalsOnce(t *testing.T) {
	s := store.NewScript("return 1")
	f := &noScriptFake{}
	if _, err := s.Run(context.Background(), f, nil, nil); !errors.Is(err, store.ErrNoScript) || f.evals != 1 {
		t.Errorf("Run = %v after %d EVALs; want ErrNoScript after one", err, f.evals)
	}
	f.evals = 0
	if _, err := s.RunInt64s(context.Background(), f, nil, nil, nil); !errors.Is(err, store.ErrNoScript) || f.evals != 1 {
		t.Errorf("RunInt64s = %v after %d EVALs; want ErrNoScript after one", err, f.evals)
	}
}
