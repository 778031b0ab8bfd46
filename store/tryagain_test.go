package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quotagate/limiter/store"
)

// refuser answers each script call with the next of errs (then with a
// value), and records the calls: "sha" or "eval", plain or Int64s.
type refuser struct {
	store.Store
	errs  []error
	calls []string
}

func (f *refuser) next(call string) error {
	f.calls = append(f.calls, call)
	if len(f.errs) == 0 {
		return nil
	}
	err := f.errs[0]
	f.errs = f.errs[1:]
	return err
}

func (f *refuser) EvalSha(context.Context, string, []string, []any) (any, error) {
	if err := f.next("sha"); err != nil {
		return nil, err
	}
	return int64(7), nil
}

func (f *refuser) Eval(context.Context, string, []string, []any) (any, error) {
	if err := f.next("eval"); err != nil {
		return nil, err
	}
	return int64(7), nil
}

// intRefuser is refuser with the Int64s calls, which RunInt64s must use.
type intRefuser struct{ refuser }

func (f *intRefuser) EvalShaInt64s(_ context.Context, _ string, _ []string, _ []int64, dst []int64) ([]int64, error) {
	if err := f.next("sha64"); err != nil {
		return nil, err
	}
	return append(dst, 7), nil
}

func (f *intRefuser) EvalInt64s(_ context.Context, _ string, _ []string, _ []int64, dst []int64) ([]int64, error) {
	if err := f.next("eval64"); err != nil {
		return nil, err
	}
	return append(dst, 7), nil
}

var tryAgain = fmt.Errorf("adapter: %w: TRYAGAIN Multiple keys request during rehashing of slot", store.ErrTryAgain)

func TestScriptSendsAgainAfterTryAgain(t *testing.T) {
	s := store.NewScript("return 7")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cases := []struct {
		name string
		errs []error
		want []string // the calls, plain; Int64s has "64" after each
	}{
		{"refused twice", []error{tryAgain, tryAgain}, []string{"sha", "sha", "sha"}},
		{"not in the cache, then refused", []error{store.ErrNoScript, tryAgain}, []string{"sha", "eval", "eval"}},
		{"refused, then not in the cache", []error{tryAgain, store.ErrNoScript, tryAgain}, []string{"sha", "sha", "eval", "eval"}},
	}
	for _, c := range cases {
		f := &refuser{errs: c.errs}
		v, err := s.Run(ctx, f, []string{"k"}, nil)
		if v != int64(7) || err != nil || fmt.Sprint(f.calls) != fmt.Sprint(c.want) {
			t.Errorf("Run, %s: %v, %v after calls %v; want 7 after %v", c.name, v, err, f.calls, c.want)
		}
		fi := &intRefuser{refuser{errs: c.errs}}
		got, err := s.RunInt64s(ctx, fi, []string{"k"}, nil, nil)
		want := make([]string, len(c.want))
		for i, w := range c.want {
			want[i] = w + "64"
		}
		if fmt.Sprint(got) != "[7]" || err != nil || fmt.Sprint(fi.calls) != fmt.Sprint(want) {
			t.Errorf("RunInt64s, %s: %v, %v after calls %v; want [7] after %v", c.name, got, err, fi.calls, want)
		}
	}
	// Any other error is returned at once: a lost reply may have run.
	for _, e := range []error{store.ErrUnknownOutcome, errors.New("ERR wrong")} {
		f := &refuser{errs: []error{tryAgain, e}}
		if _, err := s.Run(ctx, f, nil, nil); !errors.Is(err, e) || len(f.calls) != 2 {
			t.Errorf("Run after TRYAGAIN then %v: %v after %v calls; want it after 2", e, err, f.calls)
		}
	}
}

func TestTryAgainPauseBounds(t *testing.T) {
	s := store.NewScript("return 7")
	// A deadline nearer than the next pause: given up at once.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
	defer cancel()
	f := &refuser{errs: []error{tryAgain, tryAgain}}
	start := time.Now()
	_, err := s.Run(ctx, f, nil, nil)
	if took := time.Since(start); !errors.Is(err, store.ErrTryAgain) || len(f.calls) != 1 || took >= time.Second {
		t.Errorf("Run with 2 ms left: %v after %v calls in %v; want ErrTryAgain after 1, at once", err, f.calls, took)
	}
	// Without a deadline: 15 sends, about a second of pauses.
	f = &refuser{}
	for range 100 {
		f.errs = append(f.errs, tryAgain)
	}
	start = time.Now()
	_, err = s.Run(context.Background(), f, nil, nil)
	took := time.Since(start)
	if !errors.Is(err, store.ErrTryAgain) || len(f.calls) != 15 || took < 600*time.Millisecond {
		t.Errorf("Run refused forever, no deadline: %v after %d calls in %v; want ErrTryAgain after 15, at least 0.6 s", err, len(f.calls), took)
	}
	if !store.TryAgainPause(context.Background(), 1) {
		t.Error("TryAgainPause(1) without a deadline = false")
	}
	// An ended context ends the pause (the first is at least 3.75 ms).
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if store.TryAgainPause(done, 1) {
		t.Error("TryAgainPause on an ended context = true")
	}
}
