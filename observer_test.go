package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// newMiniFastFail is newMini with a client that does not retry a refused
// dial (go-redis retries 5 times, 100 ms apart, by default).
func newMiniFastFail(t *testing.T) (*redistest.Mini, *goredis.Store) {
	t.Helper()
	m := redistest.NewMini(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	return m, goredis.New(rdb)
}

// tally is an Observer that counts what it is told.
type tally struct {
	mu                          sync.Mutex
	decisions, degraded, errors int
	keys                        []string
	errs                        []error
}

func (t *tally) OnDecision(_ context.Context, key string, r limiter.Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.decisions++
	if r.Degraded {
		t.degraded++
	}
	t.keys = append(t.keys, key)
}

func (t *tally) OnError(_ context.Context, key string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.errors++
	t.errs = append(t.errs, err)
}

func (t *tally) counts() [3]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return [3]int{t.decisions, t.degraded, t.errors}
}

// TestObserverOncePerCall: healthy calls are told to OnDecision once each,
// bad input to OnError once each, and with Redis down every mode tells
// OnError exactly once per call, plus OnDecision for the Degraded Result.
func TestObserverOncePerCall(t *testing.T) {
	m, st := newMiniFastFail(t)
	modes := []limiter.FailMode{limiter.FailError, limiter.FailOpen, limiter.FailClosed}
	tallies := make([]*tally, len(modes))
	lims := make([]*limiter.Limiter, len(modes))
	for i, mode := range modes {
		tallies[i] = &tally{}
		lims[i] = newLimiter(t, st, limiter.WithFailMode(mode), limiter.WithObserver(tallies[i]), limiter.WithTimeout(time.Second))
	}
	ctx := context.Background()
	l := limiter.PerMinute(2)
	for i, lim := range lims {
		for j := 0; j < 3; j++ { // 2 admitted, 1 denied: all decisions
			if _, err := lim.Allow(ctx, "k", l.Named(modes[i].String())); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := lim.Peek(ctx, "k", l.Named(modes[i].String())); err != nil {
			t.Fatal(err)
		}
		_, err1 := lim.Allow(ctx, "", l)
		_, err2 := lim.AllowN(ctx, "k", -1, l)
		_, err3 := lim.Allow(ctx, "k")
		if err1 == nil || err2 == nil || err3 == nil {
			t.Fatalf("bad input accepted: %v %v %v", err1, err2, err3)
		}
		if got := tallies[i].counts(); got != [3]int{4, 0, 3} {
			t.Errorf("%s, Redis up: told [decisions degraded errors] = %v, want [4 0 3]", modes[i], got)
		}
	}

	m.Close() // Redis goes away
	const calls = 5
	for i, lim := range lims {
		for j := 0; j < calls; j++ {
			r, err := lim.Allow(ctx, "k", l)
			switch modes[i] {
			case limiter.FailError:
				if err == nil {
					t.Errorf("FailError with Redis down: %+v, no error", r)
				}
			default:
				if err != nil || !r.Degraded || r.Cause == nil || r.Allowed != (modes[i] == limiter.FailOpen) {
					t.Errorf("%s with Redis down: %+v, %v", modes[i], r, err)
				}
			}
		}
		want := [3]int{4 + calls, calls, 3 + calls}
		if modes[i] == limiter.FailError {
			want = [3]int{4, 0, 3 + calls}
		}
		if got := tallies[i].counts(); got != want {
			t.Errorf("%s, Redis down: told [decisions degraded errors] = %v, want %v", modes[i], got, want)
		}
		for _, err := range tallies[i].errs[3:] {
			if errors.Is(err, limiter.ErrInvalidKey) || errors.Is(err, limiter.ErrInvalidCost) {
				t.Errorf("%s: backend failure told as %v", modes[i], err)
			}
		}
	}
}

// TestObserverContextAndKey: the observer gets the caller's context (not
// the limiter's timeout context) and the subject.
func TestObserverContextAndKey(t *testing.T) {
	_, st := newMini(t)
	type ctxKey struct{}
	var gotCtx context.Context
	var gotKey string
	lim := newLimiter(t, st, limiter.WithTimeout(time.Second), limiter.WithObserver(limiter.ObserverFuncs{
		Decision: func(ctx context.Context, key string, _ limiter.Result) { gotCtx, gotKey = ctx, key },
	}))
	ctx := context.WithValue(context.Background(), ctxKey{}, "v")
	if _, err := lim.Allow(ctx, "user:1", limiter.PerSecond(1)); err != nil {
		t.Fatal(err)
	}
	if gotKey != "user:1" || gotCtx.Value(ctxKey{}) != "v" || gotCtx.Err() != nil {
		t.Errorf("observer got key %q, ctx value %v, ctx err %v", gotKey, gotCtx.Value(ctxKey{}), gotCtx.Err())
	}
	// An ObserverFuncs without Error is fine on an error.
	if _, err := lim.Allow(ctx, "", limiter.PerSecond(1)); !errors.Is(err, limiter.ErrInvalidKey) {
		t.Errorf("empty key: %v", err)
	}
}

// TestObserverSeveral: WithObserver twice tells both, in order; nil is
// ErrInvalidOption.
func TestObserverSeveral(t *testing.T) {
	_, st := newMini(t)
	var order []string
	mk := func(name string) limiter.Observer {
		return limiter.ObserverFuncs{Decision: func(context.Context, string, limiter.Result) { order = append(order, name) }}
	}
	lim := newLimiter(t, st, limiter.WithObserver(mk("a")), limiter.WithObserver(mk("b")))
	lim2, err := lim.With(limiter.WithObserver(mk("c")))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = lim.Allow(context.Background(), "k", limiter.PerSecond(5))
	_, _ = lim2.Allow(context.Background(), "k", limiter.PerSecond(5))
	if got := len(order); got != 5 || order[0] != "a" || order[1] != "b" || order[4] != "c" {
		t.Errorf("observers told in order %v, want [a b a b c]", order)
	}
	if _, err := limiter.New(st, strategy.NewFixedWindow(), limiter.WithObserver(nil)); !errors.Is(err, limiter.ErrInvalidOption) {
		t.Errorf("nil observer: %v", err)
	}
	var nilFuncs *tally
	if _, err := limiter.New(st, strategy.NewFixedWindow(), limiter.WithObserver(nilFuncs)); !errors.Is(err, limiter.ErrInvalidOption) {
		t.Errorf("nil *tally observer: %v", err)
	}
}

// TestWith: a derived limiter decides on the same counters with its own
// fail mode; the original is unchanged.
func TestWith(t *testing.T) {
	m, st := newMiniFastFail(t)
	lim := newLimiter(t, st)
	closed, err := lim.With(limiter.WithFailMode(limiter.FailClosed))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lim.With(limiter.WithFailMode(7)); !errors.Is(err, limiter.ErrInvalidOption) {
		t.Errorf("With(bad mode) = %v", err)
	}
	ctx := context.Background()
	l := limiter.PerMinute(3).Named("shared")
	_, _ = lim.Allow(ctx, "k", l)
	r, err := closed.Allow(ctx, "k", l)
	if err != nil || r.Remaining != 1 {
		t.Errorf("derived limiter: %+v, %v; want the shared counter at 2 (1 remaining)", r, err)
	}
	m.Close()
	if r, err := closed.Allow(ctx, "k", l); err != nil || !r.Degraded || r.Allowed {
		t.Errorf("derived FailClosed with Redis down: %+v, %v", r, err)
	}
	if _, err := lim.Allow(ctx, "k", l); err == nil {
		t.Error("the original limiter's fail mode changed: no error with Redis down")
	}
}

// TestObserverToldCauseOfRedisDecision: a decision made by Redis that
// carries a Cause (work after it failed) is told to OnError, then to
// OnDecision, and returned as it is: not Degraded, not an error.
func TestObserverToldCauseOfRedisDecision(t *testing.T) {
	_, st := newMini(t)
	cause := errors.New("taking back a denied request's count: connection lost")
	s := fixedOutcome{res: limiter.Result{Allowed: false, RetryAfter: time.Second, Cause: cause}}
	var tl tally
	lim, err := limiter.New(st, s, limiter.WithObserver(&tl), limiter.WithFailMode(limiter.FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	r, err := lim.Allow(context.Background(), "k", limiter.PerMinute(5))
	if err != nil || r.Allowed || r.Degraded || r.Cause != cause {
		t.Fatalf("Allow = %+v, %v; want the strategy's denial with its Cause", r, err)
	}
	if got := tl.counts(); got != [3]int{1, 0, 1} {
		t.Errorf("observer told %d decisions, %d degraded, %d errors; want 1, 0, 1", got[0], got[1], got[2])
	}
	if len(tl.errs) != 1 || tl.errs[0] != cause {
		t.Errorf("OnError got %v, want the cause", tl.errs)
	}
}

// calls is a CallObserver that records what OnCall is told, and checks it
// comes after OnDecision or OnError.
type calls struct {
	tally
	mu    sync.Mutex
	seen  []error
	tooks []time.Duration
	order []string
}

func (c *calls) OnDecision(ctx context.Context, key string, r limiter.Result) {
	c.tally.OnDecision(ctx, key, r)
	c.mu.Lock()
	c.order = append(c.order, "decision")
	c.mu.Unlock()
}

func (c *calls) OnError(ctx context.Context, key string, err error) {
	c.tally.OnError(ctx, key, err)
	c.mu.Lock()
	c.order = append(c.order, "error")
	c.mu.Unlock()
}

func (c *calls) OnCall(_ context.Context, _ string, _ limiter.Result, err error, took time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = append(c.seen, err)
	c.tooks = append(c.tooks, took)
	c.order = append(c.order, "call")
}

// TestCallObserver: a CallObserver, alone or among others, is told every
// call once, after its OnDecision or OnError, with the error the call
// returned and a positive duration.
func TestCallObserver(t *testing.T) {
	m, st := newMiniFastFail(t)
	c := &calls{}
	plain := &tally{}
	lim, err := limiter.New(st, strategy.NewFixedWindow(), limiter.WithObserver(plain), limiter.WithObserver(c))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := lim.Allow(ctx, "u", limiter.PerSecond(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := lim.Allow(ctx, "", limiter.PerSecond(1)); !errors.Is(err, limiter.ErrInvalidKey) {
		t.Fatalf("empty key: %v", err)
	}
	m.Close()
	_, downErr := lim.Allow(ctx, "u", limiter.PerSecond(1))
	if downErr == nil {
		t.Fatal("a call with Redis gone succeeded")
	}
	want := []string{"decision", "call", "error", "call", "error", "call"}
	if len(c.order) != len(want) {
		t.Fatalf("order %v, want %v", c.order, want)
	}
	for i := range want {
		if c.order[i] != want[i] {
			t.Fatalf("order %v, want %v", c.order, want)
		}
	}
	if c.seen[0] != nil || !errors.Is(c.seen[1], limiter.ErrInvalidKey) || c.seen[2] != downErr {
		t.Errorf("OnCall saw %v", c.seen)
	}
	for i, d := range c.tooks {
		if d <= 0 {
			t.Errorf("call %d took %s", i, d)
		}
	}
	if kinds := []string{limiter.ErrorKind(c.seen[1]), limiter.ErrorKind(downErr)}; kinds[0] != "invalid_input" || kinds[1] != "backend" {
		t.Errorf("ErrorKind = %q", kinds)
	}
}

// TestErrorKind names each sentinel's kind.
func TestErrorKind(t *testing.T) {
	for err, want := range map[error]string{
		nil:                    "",
		limiter.ErrInvalidCost: "invalid_input",
		fmt.Errorf("x: %w", limiter.ErrInvalidLimit):                            "invalid_input",
		limiter.ErrContention:                                                   "contention",
		limiter.ErrCorruptCounter:                                               "corrupt_counter",
		fmt.Errorf("%w: %w", store.ErrUnknownOutcome, context.DeadlineExceeded): "unknown_outcome",
		fmt.Errorf("dial: %w", context.DeadlineExceeded):                        "timeout",
		context.Canceled:                                                        "canceled",
		errors.New("ERR OOM command not allowed"):                               "backend",
		fmt.Errorf("%w: cost 5, limit 3/1s", limiter.ErrNeverAdmitted):          "wait",
		limiter.ErrWaitTooLong:                                                  "wait",
		fmt.Errorf("x: %w: TRYAGAIN", store.ErrTryAgain):                        "try_again",
	} {
		if got := limiter.ErrorKind(err); got != want {
			t.Errorf("ErrorKind(%v) = %q, want %q", err, got, want)
		}
	}
}

// TestAllowManyObservedOutsideTheBatch: AllowMany through a strategy that
// decides each ask with its own call (Bucketed, Optimistic) tells the
// observer after the batch, on the caller's goroutine. It was told inside
// the batch's one deadline, by the workers: an observer taking 120 ms of
// a 200 ms timeout left the third ask to the fail mode, and under
// FailOpen a limit of 1 admitted 2; a panicking observer ended the process,
// where the caller could not recover it.
func TestAllowManyObservedOutsideTheBatch(t *testing.T) {
	l := []limiter.Limit{limiter.PerMinute(1)}
	asks := []limiter.Ask{{Key: "u", Limits: l}, {Key: "u", Limits: l}, {Key: "u", Limits: l}}
	for name, s := range map[string]limiter.Strategy{"Bucketed": strategy.NewBucketed(), "Optimistic": strategy.NewOptimistic()} {
		t.Run(name+"/slow", func(t *testing.T) {
			_, st := newMini(t)
			obs := &tally{}
			slow := limiter.ObserverFuncs{Decision: func(ctx context.Context, key string, r limiter.Result) {
				time.Sleep(120 * time.Millisecond)
				obs.OnDecision(ctx, key, r)
			}, Error: obs.OnError}
			lim, err := limiter.New(st, s, limiter.WithFailMode(limiter.FailOpen), limiter.WithTimeout(200*time.Millisecond), limiter.WithObserver(slow))
			if err != nil {
				t.Fatal(err)
			}
			admitted := 0
			for i, a := range lim.AllowMany(context.Background(), asks) {
				if a.Err != nil || a.Result.Degraded {
					t.Errorf("ask %d = %+v, %v; want Redis's decision", i, a.Result, a.Err)
				}
				if a.Result.Allowed {
					admitted++
				}
			}
			if c := obs.counts(); admitted != 1 || c != [3]int{3, 0, 0} {
				t.Errorf("%d of 3 asks admitted on a limit of 1, observer told %v (decisions, degraded, errors); want 1, and [3 0 0]", admitted, c)
			}
		})
		t.Run(name+"/panic", func(t *testing.T) {
			_, st := newMini(t)
			bug := limiter.ObserverFuncs{Decision: func(context.Context, string, limiter.Result) { panic("observer bug") }}
			lim, err := limiter.New(st, s, limiter.WithObserver(bug))
			if err != nil {
				t.Fatal(err)
			}
			got := func() (v any) {
				defer func() { v = recover() }()
				lim.AllowMany(context.Background(), asks)
				return nil
			}()
			if got != "observer bug" {
				t.Errorf("AllowMany with a panicking observer: recovered %v; want the observer's panic, on the caller's goroutine", got)
			}
		})
	}
}
