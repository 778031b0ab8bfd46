package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// TestBoundsInclusive: each documented bound is itself accepted (by the
// calls and CheckLimits), one past it refused, and the documented values
// are those of the constants.
func TestBoundsInclusive(t *testing.T) {
	if limiter.MaxPeriod != 31*24*time.Hour || limiter.MinPeriod != time.Millisecond || limiter.MaxRate != 1<<50 || limiter.MaxLimits != 16 {
		t.Fatalf("bounds %s %s %d %d; want 31 days, 1ms, 2^50, 16", limiter.MaxPeriod, limiter.MinPeriod, int64(limiter.MaxRate), limiter.MaxLimits)
	}
	if d := limiter.PerDay(1).Period; d != 24*time.Hour {
		t.Fatalf("PerDay period %s", d)
	}
	m, st := newMini(t)
	lim := newLimiter(t, st)
	ctx := context.Background()
	sixteen := make([]limiter.Limit, limiter.MaxLimits)
	for i := range sixteen {
		sixteen[i] = limiter.Per(1, time.Duration(i+1)*time.Second)
	}
	ok := [][]limiter.Limit{
		sixteen,
		{limiter.Per(limiter.MaxRate, time.Hour)},
		{{Rate: 1, Period: time.Hour, Burst: limiter.MaxRate}},
		{limiter.Per(1, time.Millisecond)},
		{limiter.Per(1, 31*24*time.Hour)},
	}
	for i, ls := range ok {
		if err := lim.CheckLimits(ls...); err != nil {
			t.Errorf("case %d: CheckLimits = %v", i, err)
		}
		if _, err := lim.Peek(ctx, "k", ls...); err != nil {
			t.Errorf("case %d: Peek = %v", i, err)
		}
	}
	bad := [][]limiter.Limit{
		{{Rate: 1, Period: time.Hour, Burst: limiter.MaxRate + 1}},
		{limiter.Per(1, 32*24*time.Hour)},
	}
	for i, ls := range bad {
		if _, err := lim.Peek(ctx, "k", ls...); !errors.Is(err, limiter.ErrInvalidLimit) {
			t.Errorf("bad case %d: Peek = %v; want ErrInvalidLimit", i, err)
		}
	}
	if keys := m.Keys(); len(keys) != 0 {
		t.Errorf("Peek wrote %q", keys)
	}
}

func TestLimitStringNamed(t *testing.T) {
	if s := limiter.PerSecond(5).Named("api").String(); s != "api=5/1s" {
		t.Fatalf("String = %q", s)
	}
}

type ptrStrategy struct{}

func (*ptrStrategy) Decide(context.Context, store.Store, limiter.Request) (limiter.Result, error) {
	return limiter.Result{Allowed: true}, nil
}

// TestNewRefusesEdgeOptions: a typed nil strategy, the first fail mode past
// FailClosed, the smallest negative timeout, a prefix with a '}'.
func TestNewRefusesEdgeOptions(t *testing.T) {
	_, st := newMini(t)
	fw := strategy.NewFixedWindow()
	var nilStrategy *ptrStrategy
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"typed nil strategy", second(limiter.New(st, nilStrategy)), limiter.ErrNilStrategy},
		{"fail mode 3", second(limiter.New(st, fw, limiter.WithFailMode(limiter.FailClosed+1))), limiter.ErrInvalidOption},
		{"timeout -1ns", second(limiter.New(st, fw, limiter.WithTimeout(-1))), limiter.ErrInvalidOption},
		{"prefix with a closing brace", second(limiter.New(st, fw, limiter.WithPrefix("a}b"))), limiter.ErrInvalidOption},
		{"Key with a closing brace", second(limiter.Key("a}b", "s", limiter.PerSecond(1))), limiter.ErrInvalidOption},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
}

// TestDegradedResultNamesItsLimit: a decision made by the fail mode reports
// the call's first limit (Index 0) as its binding Limit; a contention
// denial's RetryAfter, like FailClosed's, is at most a second.
func TestDegradedResultNamesItsLimit(t *testing.T) {
	_, st := newMini(t)
	ctx := context.Background()
	ls := []limiter.Limit{limiter.PerMinute(5), limiter.PerHour(50)}
	for _, c := range []struct {
		mode    limiter.FailMode
		err     error
		allowed bool
	}{
		{limiter.FailOpen, errors.New("backend gone"), true},
		{limiter.FailClosed, errors.New("backend gone"), false},
		{limiter.FailOpen, fmt.Errorf("x: %w", limiter.ErrContention), false},
		{limiter.FailClosed, fmt.Errorf("x: %w", limiter.ErrContention), false},
	} {
		lim, err := limiter.New(st, fixedOutcome{err: c.err}, limiter.WithFailMode(c.mode))
		if err != nil {
			t.Fatal(err)
		}
		r, err := lim.Allow(ctx, "k", ls...)
		if err != nil || r.Allowed != c.allowed || !r.Degraded || r.Limit != ls[0] || r.Index != 0 {
			t.Errorf("%s, %v: %+v, %v; want allowed=%v, Degraded, Limit %s", c.mode, c.err, r, err, c.allowed, ls[0])
		}
		if !c.allowed && r.RetryAfter != time.Second {
			t.Errorf("%s, %v: RetryAfter %s; want 1s (the period, at most a second)", c.mode, c.err, r.RetryAfter)
		}
	}
}

// TestStrategyBadCostIsNeverFailedOpen: a strategy's ErrInvalidCost is bad
// input, returned in every fail mode, as its ErrInvalidLimit is.
func TestStrategyBadCostIsNeverFailedOpen(t *testing.T) {
	_, st := newMini(t)
	s := fixedOutcome{err: fmt.Errorf("strategy: %w: too big", limiter.ErrInvalidCost)}
	lim, err := limiter.New(st, s, limiter.WithFailMode(limiter.FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := lim.Allow(context.Background(), "k", limiter.PerSecond(1)); !errors.Is(err, limiter.ErrInvalidCost) || r.Allowed {
		t.Fatalf("Allow = %+v, %v; want ErrInvalidCost", r, err)
	}
}

// delRefused answers every DEL with an error reply (a round trip that
// worked, a command that did not).
type delRefused struct{ store.Store }

var errDelRefused = errors.New("ERR DEL refused")

func (d delRefused) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if len(cmds) == 1 && cmds[0].Name == "DEL" {
		return []store.Reply{{Err: errDelRefused}}, nil
	}
	return d.Store.Do(ctx, cmds...)
}

// TestResetReportsARefusedDel: Reset whose DEL Redis refused returns that
// error, not nil (the counters were not forgotten).
func TestResetReportsARefusedDel(t *testing.T) {
	_, st := newMini(t)
	lim := newLimiter(t, delRefused{st})
	if err := lim.Reset(context.Background(), "k", limiter.PerSecond(1)); !errors.Is(err, errDelRefused) {
		t.Fatalf("Reset = %v; want the DEL's error", err)
	}
}

// TestKeySubjectBounds pins which subjects stay verbatim: up to 128 bytes
// of printable ASCII without space, braces or DEL; any other becomes '#'
// and 32 hex digits.
func TestKeySubjectBounds(t *testing.T) {
	l := limiter.PerSecond(1)
	tag := func(subject string) string {
		k, err := limiter.Key("p", subject, l)
		if err != nil {
			t.Fatal(err)
		}
		return k[len("p:{"):strings.IndexByte(k, '}')]
	}
	plain := strings.Repeat("a", 128)
	if got := tag(plain); got != plain {
		t.Errorf("128-byte subject became %q", got)
	}
	for _, s := range []string{plain + "a", "a b", "a\x7f", "\x00"} {
		got := tag(s)
		if len(got) != 33 || got[0] != '#' || strings.Trim(got[1:], "0123456789abcdef") != "" {
			t.Errorf("subject %q became %q; want '#' and 32 hex digits", s, got)
		}
	}
}

// TestBinderNeverOutranksALaterWait: a limit that never admits (-1) binds
// a denial even when a limit before it denied with a finite wait.
func TestBinderNeverOutranksALaterWait(t *testing.T) {
	var b limiter.Binder
	b.Add(0, 0, time.Second, 5*time.Second)
	b.Add(1, 0, time.Hour, -1)
	if r := b.Result(false); r.RetryAfter != -1 || r.Index != 1 {
		t.Fatalf("Result = %+v; want RetryAfter -1 from limit 1", r)
	}
}
