package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

func newMini(t *testing.T) (*redistest.Mini, *goredis.Store) {
	t.Helper()
	m := redistest.NewMini(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return m, goredis.New(rdb)
}

func newLimiter(t *testing.T, st store.Store, opts ...limiter.Option) *limiter.Limiter {
	t.Helper()
	l, err := limiter.New(st, strategy.NewFixedWindow(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestBadInputWritesNothing: every bad input returns its sentinel before any
// I/O: the server sees no command at all.
func TestBadInputWritesNothing(t *testing.T) {
	m, st := newMini(t)
	lim := newLimiter(t, st)
	ok := limiter.PerSecond(10)
	many := make([]limiter.Limit, limiter.MaxLimits+1)
	for i := range many {
		many[i] = limiter.Per(1, time.Duration(i+1)*time.Second)
	}
	cases := []struct {
		name   string
		key    string
		cost   int64
		limits []limiter.Limit
		want   error
	}{
		{"empty key", "", 1, []limiter.Limit{ok}, limiter.ErrInvalidKey},
		{"no limits", "k", 1, nil, limiter.ErrInvalidLimit},
		{"zero rate", "k", 1, []limiter.Limit{limiter.PerSecond(0)}, limiter.ErrInvalidLimit},
		{"negative rate", "k", 1, []limiter.Limit{limiter.PerSecond(-5)}, limiter.ErrInvalidLimit},
		{"rate above MaxRate", "k", 1, []limiter.Limit{limiter.PerSecond(limiter.MaxRate + 1)}, limiter.ErrInvalidLimit},
		{"negative burst", "k", 1, []limiter.Limit{{Rate: 1, Period: time.Second, Burst: -1}}, limiter.ErrInvalidLimit},
		{"zero period", "k", 1, []limiter.Limit{{Rate: 1}}, limiter.ErrInvalidLimit},
		{"period under 1ms", "k", 1, []limiter.Limit{limiter.Per(1, 999*time.Microsecond)}, limiter.ErrInvalidLimit},
		{"period not whole ms", "k", 1, []limiter.Limit{limiter.Per(1, 1500*time.Microsecond)}, limiter.ErrInvalidLimit},
		{"period above MaxPeriod", "k", 1, []limiter.Limit{limiter.Per(1, limiter.MaxPeriod+time.Millisecond)}, limiter.ErrInvalidLimit},
		{"shared counter", "k", 1, []limiter.Limit{limiter.PerSecond(1), limiter.PerSecond(2)}, limiter.ErrInvalidLimit},
		{"shared name", "k", 1, []limiter.Limit{limiter.PerSecond(1).Named("a"), limiter.PerMinute(2).Named("a")}, limiter.ErrInvalidLimit},
		{"name too long", "k", 1, []limiter.Limit{ok.Named(strings.Repeat("n", limiter.MaxNameLen+1))}, limiter.ErrInvalidLimit},
		{"too many limits", "k", 1, many, limiter.ErrInvalidLimit},
		{"negative cost", "k", -1, []limiter.Limit{ok}, limiter.ErrInvalidCost},
	}
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := m.CommandCount()
			_, err := lim.AllowN(ctx, c.key, c.cost, c.limits...)
			if !errors.Is(err, c.want) {
				t.Errorf("AllowN = %v, want %v", err, c.want)
			}
			if c.cost >= 0 {
				if _, err := lim.Allow(ctx, c.key, c.limits...); !errors.Is(err, c.want) {
					t.Errorf("Allow = %v, want %v", err, c.want)
				}
				if _, err := lim.Peek(ctx, c.key, c.limits...); !errors.Is(err, c.want) {
					t.Errorf("Peek = %v, want %v", err, c.want)
				}
				if err := lim.Reset(ctx, c.key, c.limits...); !errors.Is(err, c.want) {
					t.Errorf("Reset = %v, want %v", err, c.want)
				}
			}
			if n := m.CommandCount() - before; n != 0 {
				t.Errorf("bad input sent %d commands to Redis", n)
			}
			if keys := m.Keys(); len(keys) != 0 {
				t.Errorf("bad input wrote keys %q", keys)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	_, st := newMini(t)
	fw := strategy.NewFixedWindow()
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"nil store", second(limiter.New(nil, fw)), limiter.ErrNilStore},
		{"adapter of a nil client", second(limiter.New(goredis.New(nil), fw)), limiter.ErrNilStore},
		{"nil strategy", second(limiter.New(st, nil)), limiter.ErrNilStrategy},
		{"prefix with a brace", second(limiter.New(st, fw, limiter.WithPrefix("a{b"))), limiter.ErrInvalidOption},
		{"negative timeout", second(limiter.New(st, fw, limiter.WithTimeout(-time.Second))), limiter.ErrInvalidOption},
		{"unknown fail mode", second(limiter.New(st, fw, limiter.WithFailMode(limiter.FailMode(9)))), limiter.ErrInvalidOption},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestAllowPeekReset(t *testing.T) {
	m, st := newMini(t)
	lim := newLimiter(t, st, limiter.WithPrefix("app"))
	ctx := context.Background()
	l := limiter.PerMinute(3)
	for i, want := range []int64{2, 1, 0} {
		r, err := lim.Allow(ctx, "user:1", l)
		if err != nil || !r.Allowed || r.Remaining != want || r.ResetAfter != time.Minute {
			t.Fatalf("call %d = %+v, %v; want allowed, %d remaining, reset in 1m", i, r, err, want)
		}
	}
	r, err := lim.Allow(ctx, "user:1", l)
	if err != nil || r.Allowed || r.RetryAfter != time.Minute || r.Limit != l {
		t.Fatalf("fourth call = %+v, %v; want denied, retry in 1m", r, err)
	}
	if got, _ := m.Get("app:{user:1}:60000ms"); got != "3" {
		t.Fatalf("counter = %q, want 3", got)
	}
	m.Advance(20 * time.Second)
	p, err := lim.Peek(ctx, "user:1", l)
	if err != nil || p.Allowed || p.Remaining != 0 || p.RetryAfter != 40*time.Second {
		t.Fatalf("Peek = %+v, %v; want not allowed, retry in 40s", p, err)
	}
	if err := lim.Reset(ctx, "user:1", l); err != nil {
		t.Fatal(err)
	}
	if len(m.Keys()) != 0 {
		t.Fatalf("Reset left %q", m.Keys())
	}
	p, err = lim.Peek(ctx, "user:1", l)
	if err != nil || !p.Allowed || p.Remaining != 3 || len(m.Keys()) != 0 {
		t.Fatalf("Peek after Reset = %+v, %v, keys %q", p, err, m.Keys())
	}
}

// TestFailModes: with Redis gone, FailError returns the error, FailOpen
// admits and FailClosed denies, both marked Degraded with the cause.
func TestFailModes(t *testing.T) {
	st := goneStore(t)
	ctx := context.Background()
	l := limiter.PerSecond(1)

	_, err := newLimiter(t, st).Allow(ctx, "k", l)
	if err == nil {
		t.Fatal("FailError: no error with Redis down")
	}
	r, err := newLimiter(t, st, limiter.WithFailMode(limiter.FailOpen)).Allow(ctx, "k", l)
	if err != nil || !r.Allowed || !r.Degraded || r.Cause == nil {
		t.Fatalf("FailOpen = %+v, %v; want allowed, degraded, with a cause", r, err)
	}
	r, err = newLimiter(t, st, limiter.WithFailMode(limiter.FailClosed)).Allow(ctx, "k", l)
	if err != nil || r.Allowed || !r.Degraded || r.Cause == nil || r.RetryAfter <= 0 {
		t.Fatalf("FailClosed = %+v, %v; want denied, degraded, with a cause and a RetryAfter", r, err)
	}
}

// goneStore is a store whose Redis has gone: every call fails.
func goneStore(t *testing.T) store.Store {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	m.Close()
	return goredis.New(rdb)
}

// TestTimeout: a reply slower than WithTimeout returns promptly with a
// deadline error that also says the outcome is unknown.
func TestTimeout(t *testing.T) {
	m := redistest.NewMini(t)
	p := redistest.NewProxy(t, m.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	st := goredis.New(rdb)
	lim := newLimiter(t, st, limiter.WithTimeout(100*time.Millisecond))
	ctx := context.Background()
	// Connect and load the script with no timeout: a busy machine may take
	// longer than 100ms over it.
	if _, err := newLimiter(t, st).Allow(ctx, "warm", limiter.PerSecond(5)); err != nil {
		t.Fatal(err)
	}
	p.Delay(2 * time.Second)
	start := time.Now()
	_, err := lim.Allow(ctx, "k", limiter.PerSecond(5))
	if took := time.Since(start); took > time.Second {
		t.Errorf("call took %s with a 100ms timeout", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("err = %v; want DeadlineExceeded and ErrUnknownOutcome", err)
	}
}

// fixedOutcome is a strategy that returns the same outcome every call.
type fixedOutcome struct {
	res limiter.Result
	err error
}

func (s fixedOutcome) Decide(context.Context, store.Store, limiter.Request) (limiter.Result, error) {
	return s.res, s.err
}

// TestContentionNeverAdmits: an optimistic strategy giving up under
// contention is an error (FailError) or a Degraded denial (FailOpen,
// FailClosed): Redis answered, so FailOpen does not apply to it.
func TestContentionNeverAdmits(t *testing.T) {
	_, st := newMini(t)
	l := limiter.PerMinute(5)
	s := fixedOutcome{err: fmt.Errorf("strategy: %w: 4 transactions aborted", limiter.ErrContention)}
	for _, mode := range []limiter.FailMode{limiter.FailError, limiter.FailOpen, limiter.FailClosed} {
		lim, err := limiter.New(st, s, limiter.WithFailMode(mode))
		if err != nil {
			t.Fatal(err)
		}
		r, err := lim.Allow(context.Background(), "k", l)
		switch {
		case mode == limiter.FailError && !errors.Is(err, limiter.ErrContention):
			t.Errorf("%s: %+v, %v; want ErrContention", mode, r, err)
		case mode != limiter.FailError && (err != nil || r.Allowed || !r.Degraded || !errors.Is(r.Cause, limiter.ErrContention) || r.RetryAfter <= 0):
			t.Errorf("%s: %+v, %v; want a Degraded denial with cause ErrContention and a RetryAfter", mode, r, err)
		}
	}
	// Any other backend error still follows FailOpen.
	other := fixedOutcome{err: errors.New("backend gone")}
	lim, err := limiter.New(st, other, limiter.WithFailMode(limiter.FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := lim.Allow(context.Background(), "k", l); err != nil || !r.Allowed || !r.Degraded {
		t.Errorf("FailOpen with a backend error = %+v, %v; want a Degraded admission", r, err)
	}
}

// TestWithClockNil: a nil clock is an invalid option.
func TestWithClockNil(t *testing.T) {
	_, st := newMini(t)
	if _, err := limiter.New(st, strategy.NewFixedWindow(), limiter.WithClock(nil)); !errors.Is(err, limiter.ErrInvalidOption) {
		t.Fatalf("WithClock(nil): %v; want ErrInvalidOption", err)
	}
}
