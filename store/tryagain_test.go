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

// doRefuser answers each Do with the next of replies: a reply whose Err is
// set, or, for one whose Val is an error, that error as the call's.
type doRefuser struct {
	store.Store
	replies []store.Reply
	calls   int
}

func (f *doRefuser) Do(context.Context, ...store.Cmd) ([]store.Reply, error) {
	f.calls++
	r := store.Reply{Val: int64(2)}
	if len(f.replies) > 0 {
		r, f.replies = f.replies[0], f.replies[1:]
	}
	if err, ok := r.Val.(error); ok {
		return nil, err
	}
	return []store.Reply{r}, nil
}

// DoAgain sends a command refused TRYAGAIN (as its reply or as the call's
// error) again after a pause, returns any other outcome as it came, and
// stops when the next pause would pass the deadline.
func TestDoAgain(t *testing.T) {
	tryAgain := fmt.Errorf("somestore: %w", store.ErrTryAgain)
	other := errors.New("NOPERM")
	ctx := context.Background()
	del := store.Cmd{Name: "DEL", Args: []any{"k"}}

	f := &doRefuser{replies: []store.Reply{{Err: tryAgain}, {Val: tryAgain}, {Err: tryAgain}}}
	if r, err := store.DoAgain(ctx, f, del); err != nil || r.Val != int64(2) || r.Err != nil || f.calls != 4 {
		t.Errorf("after three TRYAGAINs: %+v, %v in %d calls; want 2 in 4 calls", r, err, f.calls)
	}
	f = &doRefuser{replies: []store.Reply{{Err: other}}}
	if r, err := store.DoAgain(ctx, f, del); err != nil || !errors.Is(r.Err, other) || f.calls != 1 {
		t.Errorf("a refusal other than TRYAGAIN: %+v, %v in %d calls; want it as the reply, in 1 call", r, err, f.calls)
	}
	f = &doRefuser{replies: []store.Reply{{Val: other}}}
	if _, err := store.DoAgain(ctx, f, del); !errors.Is(err, other) || f.calls != 1 {
		t.Errorf("a failed call: %v in %d calls; want its error, in 1 call", err, f.calls)
	}
	// TRYAGAIN throughout, 30 ms of deadline: a few sends, then the
	// TRYAGAIN, before the deadline.
	many := make([]store.Reply, 100)
	for i := range many {
		many[i] = store.Reply{Err: tryAgain}
	}
	f = &doRefuser{replies: many}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	if r, err := store.DoAgain(dctx, f, del); err != nil || !errors.Is(r.Err, store.ErrTryAgain) || f.calls < 2 || time.Since(start) > 200*time.Millisecond {
		t.Errorf("TRYAGAIN throughout a 30 ms deadline: %+v, %v after %d calls and %v; want the TRYAGAIN reply after several calls, within the deadline", r, err, f.calls, time.Since(start))
	}
}
