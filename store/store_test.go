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
