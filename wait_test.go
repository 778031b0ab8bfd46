package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// virtualSleep is a Wait sleep that moves m's clock instead of sleeping,
// and records each sleep.
type virtualSleep struct {
	m     *redistest.Mini
	mu    sync.Mutex
	slept []time.Duration
}

func (v *virtualSleep) sleep(ctx context.Context, d time.Duration) error {
	v.mu.Lock()
	v.slept = append(v.slept, d)
	v.mu.Unlock()
	v.m.Advance(d)
	return ctx.Err()
}

func waitLimiter(t *testing.T, s limiter.Strategy) (*virtualSleep, *limiter.Limiter) {
	t.Helper()
	m, st := newMini(t)
	v := &virtualSleep{m: m}
	lim, err := limiter.New(st, s, limiter.WithSleep(v.sleep))
	if err != nil {
		t.Fatal(err)
	}
	return v, lim
}

// TestWaitSleepsRetryAfter: on miniredis' virtual clock, Wait sleeps the
// denial's RetryAfter (within the 1 ms jitter) and is then admitted, for a
// window and for GCRA.
func TestWaitSleepsRetryAfter(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		s    limiter.Strategy
		l    limiter.Limit
		want time.Duration
	}{
		{strategy.NewFixedWindow(), limiter.Per(2, 10*time.Second), 10 * time.Second},
		{strategy.NewGCRA(), limiter.Per(2, 10*time.Second), 5 * time.Second},
	} {
		v, lim := waitLimiter(t, tc.s)
		for range 2 {
			if r, err := lim.Allow(ctx, "w", tc.l); err != nil || !r.Allowed {
				t.Fatalf("%T: %+v, %v", tc.s, r, err)
			}
		}
		den, err := lim.Peek(ctx, "w", tc.l)
		if err != nil || den.Allowed || den.RetryAfter != tc.want {
			t.Fatalf("%T: peek = %+v, %v; want denied, retry after %s", tc.s, den, err, tc.want)
		}
		r, err := lim.Wait(ctx, "w", tc.l)
		if err != nil || !r.Allowed {
			t.Fatalf("%T: Wait = %+v, %v; want admitted", tc.s, r, err)
		}
		if len(v.slept) != 1 || v.slept[0] < tc.want || v.slept[0] > tc.want+time.Millisecond {
			t.Errorf("%T: Wait slept %v; want once, %s (+ at most 1ms of jitter)", tc.s, v.slept, tc.want)
		}
	}
}

// TestWaitReturnsAtOnce: a cost above the limit and a RetryAfter past the
// deadline return at once, with the denial and their sentinel, without
// sleeping; a context that ends during the sleep ends the wait with its
// error.
func TestWaitReturnsAtOnce(t *testing.T) {
	v, lim := waitLimiter(t, strategy.NewGCRA())
	ctx := context.Background()
	l := limiter.PerSecond(2)
	if r, err := lim.WaitN(stopAfter(t, 10*time.Second), "big", 3, l); !errors.Is(err, limiter.ErrNeverAdmitted) || r.RetryAfter != -1 {
		t.Errorf("WaitN(3) on 2/s = %+v, %v; want ErrNeverAdmitted", r, err)
	}
	if _, err := lim.AllowN(ctx, "w", 2, l); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
	defer cancel()
	if r, err := lim.Wait(short, "w", l); !errors.Is(err, limiter.ErrWaitTooLong) || r.Allowed || r.RetryAfter != 500*time.Millisecond {
		t.Errorf("Wait with 400ms left for a 500ms RetryAfter = %+v, %v; want ErrWaitTooLong", r, err)
	}
	if len(v.slept) != 0 {
		t.Errorf("slept %d times (the first %v) before giving up; want no sleep", len(v.slept), v.slept[:min(len(v.slept), 5)])
	}
	if _, err := lim.Wait(ctx, "bad", limiter.Limit{}); !errors.Is(err, limiter.ErrInvalidLimit) {
		t.Errorf("Wait with a zero limit: %v; want ErrInvalidLimit", err)
	}
}

// TestWaitNeverSleepsPastDeadline: with a real timer, a wait that fits the
// deadline is admitted before it, and a context canceled during the sleep
// returns its error promptly.
func TestWaitNeverSleepsPastDeadline(t *testing.T) {
	srv := redistest.StartServer(t)
	st := dialServer(t, srv.Addr())
	lim, err := limiter.New(st, strategy.NewGCRA())
	if err != nil {
		t.Fatal(err)
	}
	l := limiter.Per(1, 200*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := lim.Allow(ctx, "w", l); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r, err := lim.Wait(ctx, "w", l)
	if took := time.Since(start); err != nil || !r.Allowed || took > 4*time.Second {
		t.Fatalf("Wait = %+v, %v after %s; want admitted after about 200ms", r, err, took)
	}
	// The next slot is 10 s away, within the deadline; the context is
	// canceled 50 ms after Wait's first try was denied (counted from the
	// denial, so that a loaded machine's slow round trip is not cut
	// short): Wait returns then, not at the slot.
	long := limiter.Per(1, 10*time.Second)
	if _, err := lim.Allow(ctx, "long", long); err != nil {
		t.Fatal(err)
	}
	canceled, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	var once sync.Once
	watched, err := lim.With(limiter.WithObserver(limiter.ObserverFuncs{Decision: func(_ context.Context, _ string, r limiter.Result) {
		if !r.Allowed {
			once.Do(func() { time.AfterFunc(50*time.Millisecond, cancel2) })
		}
	}}))
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	r, err = watched.Wait(canceled, "long", long)
	if took := time.Since(start); !errors.Is(err, context.Canceled) || r.Allowed || r.RetryAfter <= 0 || took > 5*time.Second {
		t.Errorf("Wait canceled after 50ms = %+v, %v after %s; want the denial and context.Canceled long before the slot", r, err, took)
	}
}

func dialServer(t *testing.T, addr string) store.Store {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return goredis.New(rdb)
}

// refusing refuses the first refuse script calls with ECONNREFUSED (all
// of them when refuse is negative), then passes them on.
type refusing struct {
	store.Store
	mu     sync.Mutex
	refuse int
}

func (r *refusing) refused() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refuse == 0 {
		return false
	}
	r.refuse--
	return true
}

func (r *refusing) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	if r.refused() {
		return nil, syscall.ECONNREFUSED
	}
	return r.Store.EvalSha(ctx, sha, keys, args)
}

// TestWaitFailClosedOutage: under FailClosed, a refused connection is a
// pause, not a wait for quota: with a deadline under the second of its
// RetryAfter, WaitN tries again and is admitted once Redis answers; when
// Redis never answers it returns at the deadline with an error that is
// both the deadline's and the outage's.
func TestWaitFailClosedOutage(t *testing.T) {
	_, st := newMini(t)
	blip := &refusing{Store: st, refuse: 1}
	lim := newLimiter(t, blip, limiter.WithFailMode(limiter.FailClosed))
	ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
	defer cancel()
	if r, err := lim.Wait(ctx, "s", limiter.PerMinute(10)); err != nil || !r.Allowed || r.Degraded {
		t.Fatalf("Wait after one refused call = %+v, %v; want admitted by Redis", r, err)
	}
	down := newLimiter(t, &refusing{Store: st, refuse: -1}, limiter.WithFailMode(limiter.FailClosed))
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	r, err := down.Wait(ctx, "s", limiter.PerMinute(10))
	if r.Allowed || !r.Degraded || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Wait with Redis down = %+v, %v; want the Degraded denial, DeadlineExceeded and ECONNREFUSED", r, err)
	}
	if took := time.Since(start); took > 400*time.Millisecond {
		t.Errorf("Wait with a 300ms deadline took %s", took)
	}
}

// stalling passes the first pass script calls on, then holds each later
// one until its context ends and fails it with the context's error, as an
// adapter does with a call the context abandoned; calls counts them all.
type stalling struct {
	store.Store
	mu    sync.Mutex
	pass  int
	calls int
}

func (s *stalling) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	s.mu.Lock()
	s.calls++
	pass := s.calls <= s.pass
	s.mu.Unlock()
	if pass {
		return s.Store.EvalSha(ctx, sha, keys, args)
	}
	<-ctx.Done()
	return nil, fmt.Errorf("stalling store: %w", ctx.Err())
}

var failModes = []limiter.FailMode{limiter.FailError, limiter.FailOpen, limiter.FailClosed}

// TestWaitContextEndsDuringTry: a try that fails because ctx ended is not
// a Redis outage: in every fail mode Wait returns the last denial Redis
// made and ctx's error, never a FailOpen admission after the deadline nor
// a FailClosed "outage". The sleep is virtual (instant), so the deadline
// passes during the retry, which the store holds until then.
func TestWaitContextEndsDuringTry(t *testing.T) {
	l := limiter.Per(1, 100*time.Millisecond)
	for _, fm := range failModes {
		m, st := newMini(t)
		v := &virtualSleep{m: m}
		// the Allow below and Wait's first try reach Redis, the retry stalls
		stall := &stalling{Store: st, pass: 2}
		lim := newLimiter(t, stall, limiter.WithSleep(v.sleep), limiter.WithFailMode(fm))
		if r, err := lim.Allow(context.Background(), "w", l); err != nil || !r.Allowed {
			t.Fatalf("%v: Allow = %+v, %v", fm, r, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		r, err := lim.Wait(ctx, "w", l)
		took := time.Since(start)
		cancel()
		if r.Allowed || r.Degraded || r.RetryAfter != 100*time.Millisecond || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%v: Wait whose retry outlives the deadline = %+v, %v after %s (%d calls); want the first try's denial (RetryAfter 100ms, not degraded) and DeadlineExceeded",
				fm, r, err, took.Round(time.Millisecond), stall.calls)
		}
		if stall.calls != 3 || len(v.slept) != 1 {
			t.Errorf("%v: %d script calls, slept %v; want 3 calls (Allow, a try, the retry) and one sleep", fm, stall.calls, v.slept)
		}
	}
}

// TestWaitEndedContext: Wait on a context that has already ended returns
// its error at once, in every fail mode, without asking Redis (a FailOpen
// Limiter admitted it as an outage).
func TestWaitEndedContext(t *testing.T) {
	for _, fm := range failModes {
		_, st := newMini(t)
		count := &stalling{Store: st, pass: 1 << 30}
		lim := newLimiter(t, count, limiter.WithFailMode(fm))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r, err := lim.Wait(ctx, "w", limiter.PerSecond(1))
		if r != (limiter.Result{}) || !errors.Is(err, context.Canceled) || count.calls != 0 {
			t.Errorf("%v: Wait on a canceled context = %+v, %v after %d script calls; want a zero Result, context.Canceled and no call", fm, r, err, count.calls)
		}
	}
}

// TestWaitOutageBacksOff: under FailClosed, a Redis that refuses 12 tries
// in a row for a limit of 1 ms: the pause between them doubles from 1 ms up
// to a second (each within a jitter of a millisecond) instead of a try
// every millisecond, and the 13th, answered, is admitted.
func TestWaitOutageBacksOff(t *testing.T) {
	m, st := newMini(t)
	v := &virtualSleep{m: m}
	down := &refusing{Store: st, refuse: 12}
	lim := newLimiter(t, down, limiter.WithFailMode(limiter.FailClosed), limiter.WithSleep(v.sleep))
	r, err := lim.Wait(context.Background(), "s", limiter.Per(1, time.Millisecond))
	if err != nil || !r.Allowed || r.Degraded {
		t.Fatalf("Wait = %+v, %v; want admitted once Redis answers", r, err)
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 1000}
	if len(v.slept) != len(want) {
		t.Fatalf("slept %v; want %d pauses", v.slept, len(want))
	}
	for i, w := range want {
		if d := v.slept[i]; d < w*time.Millisecond || d > w*time.Millisecond+time.Millisecond {
			t.Errorf("pause %d: %s; want %dms (+ at most 1ms)", i+1, d, w)
		}
	}
}

// TestWaitOutageEndsAtSleepEnd: under FailClosed with Redis down, a sleep
// that ends as ctx does (and reports no error, as a timer that fired
// first) ends the wait with the last Degraded denial and an error that is
// both ctx's and the outage's (it was ctx's alone).
func TestWaitOutageEndsAtSleepEnd(t *testing.T) {
	_, st := newMini(t)
	untilEnd := func(ctx context.Context, _ time.Duration) error {
		<-ctx.Done()
		return nil
	}
	lim := newLimiter(t, &refusing{Store: st, refuse: -1}, limiter.WithFailMode(limiter.FailClosed), limiter.WithSleep(untilEnd))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	r, err := lim.Wait(ctx, "s", limiter.PerMinute(10))
	if r.Allowed || !r.Degraded || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Wait = %+v, %v; want the Degraded denial, DeadlineExceeded and ECONNREFUSED", r, err)
	}
}

// deadlineOnly is a context whose deadline passes without its Err saying
// so: ctx's own timer late, as it may be behind a store that failed the
// call at the deadline by a timer of its own (a socket's read deadline).
type deadlineOnly struct {
	context.Context
	dl time.Time
}

func (c deadlineOnly) Deadline() (time.Time, bool) { return c.dl, true }

// failsAtDeadline is a strategy whose every call fails once ctx's
// deadline has passed, as a client reading from a silent server does, its
// outcome unknown.
type failsAtDeadline struct{}

func (failsAtDeadline) Decide(ctx context.Context, _ store.Store, _ limiter.Request) (limiter.Result, error) {
	if dl, ok := ctx.Deadline(); ok {
		time.Sleep(time.Until(dl) + time.Millisecond)
	}
	return limiter.Result{}, fmt.Errorf("%w: read tcp: i/o timeout", store.ErrUnknownOutcome)
}

// TestWaitFailsAtDeadlineBeforeContext: under FailOpen, a try that the
// store failed at ctx's deadline, before ctx's own timer ended ctx, is
// not an outage admission: Wait returns ctx's deadline error (it returned
// a Degraded admission and no error, 3 to 9 Waits in 20 through rueidis
// and redigo against a silent server).
func TestWaitFailsAtDeadlineBeforeContext(t *testing.T) {
	_, st := newMini(t)
	lim, err := limiter.New(st, failsAtDeadline{}, limiter.WithFailMode(limiter.FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	ctx := deadlineOnly{Context: context.Background(), dl: time.Now().Add(20 * time.Millisecond)}
	r, err := lim.Wait(ctx, "w", limiter.PerMinute(10))
	if r.Allowed || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait whose try failed at its deadline = %+v, %v; want no admission and DeadlineExceeded", r, err)
	}
}

// TestWaitObservedAsItReports: the observer is told each try of Wait as
// Wait reports it. A try that fails because ctx ended is ctx's error, not
// a FailOpen admission (it was told one, which metrics counted as
// admitted); a denial no wait can help fires OnError with the wait's error
// (ErrNeverAdmitted, ErrWaitTooLong: the "wait" kind, which no observer
// was ever told), then OnDecision with the denial.
func TestWaitObservedAsItReports(t *testing.T) {
	t.Run("ctx-ends-during-a-try", func(t *testing.T) {
		l := limiter.Per(1, 100*time.Millisecond)
		m, st := newMini(t)
		v := &virtualSleep{m: m}
		stall := &stalling{Store: st, pass: 2} // the Allow and the first try
		obs := &tally{}
		lim := newLimiter(t, stall, limiter.WithSleep(v.sleep), limiter.WithFailMode(limiter.FailOpen), limiter.WithObserver(obs))
		if r, err := lim.Allow(context.Background(), "w", l); err != nil || !r.Allowed {
			t.Fatalf("Allow = %+v, %v", r, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if r, err := lim.Wait(ctx, "w", l); r.Allowed || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait = %+v, %v; want the denial and DeadlineExceeded", r, err)
		}
		c := obs.counts()
		if c != [3]int{2, 0, 1} || limiter.ErrorKind(obs.errs[0]) != "timeout" {
			t.Errorf("observer told %v (decisions, degraded, errors), errors %v; want [2 0 1]: the Allow, the denied try, and the last try as the timeout that ended the wait (kind timeout)", c, obs.errs)
		}
	})
	for name, tc := range map[string]struct {
		cost     int64
		l        limiter.Limit
		deadline time.Duration
		want     error
	}{
		"never": {5, limiter.PerSecond(3), 0, limiter.ErrNeverAdmitted},
		"long":  {1, limiter.PerHour(1), time.Second, limiter.ErrWaitTooLong},
	} {
		t.Run(name, func(t *testing.T) {
			_, st := newMini(t)
			obs := &tally{}
			lim := newLimiter(t, st, limiter.WithObserver(obs))
			if tc.want == limiter.ErrWaitTooLong {
				if r, err := lim.Allow(context.Background(), "w", tc.l); err != nil || !r.Allowed {
					t.Fatalf("Allow = %+v, %v", r, err)
				}
			}
			// without a deadline, a cancel after 10 s: a wait that goes
			// on fails here rather than at go test's timeout
			ctx := stopAfter(t, 10*time.Second)
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.deadline)
				defer cancel()
			}
			before := obs.counts()
			if r, err := lim.WaitN(ctx, "w", tc.cost, tc.l); r.Allowed || !errors.Is(err, tc.want) {
				t.Fatalf("WaitN(%d) at %s = %+v, %v; want a denial and %v", tc.cost, tc.l, r, err, tc.want)
			}
			c := obs.counts()
			if c[0]-before[0] != 1 || c[2]-before[2] != 1 || !errors.Is(obs.errs[len(obs.errs)-1], tc.want) || limiter.ErrorKind(obs.errs[len(obs.errs)-1]) != "wait" {
				t.Errorf("observer told %v after %v (decisions, degraded, errors), errors %v; want one more decision (the denial) and one more error, %v (kind wait)", c, before, obs.errs, tc.want)
			}
		})
	}
}

// stopAfter returns a context without a deadline that is canceled after d
// of real time (or when t ends): a Wait that should return at once but
// goes on ends with context.Canceled, which the test reports, rather than
// running until go test's timeout.
func stopAfter(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	stop := time.AfterFunc(d, cancel)
	t.Cleanup(func() {
		stop.Stop()
		cancel()
	})
	return ctx
}
