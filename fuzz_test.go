package limiter_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// spyStore counts the calls that reach it and fails each one.
type spyStore struct{ calls atomic.Int64 }

var errSpy = errors.New("spy store: no Redis here")

func (s *spyStore) Do(context.Context, ...store.Cmd) ([]store.Reply, error) {
	s.calls.Add(1)
	return nil, errSpy
}

func (s *spyStore) EvalSha(context.Context, string, []string, []any) (any, error) {
	s.calls.Add(1)
	return nil, errSpy
}

func (s *spyStore) Eval(context.Context, string, []string, []any) (any, error) {
	s.calls.Add(1)
	return nil, errSpy
}

// Watch implements store.Watcher for Optimistic.
func (s *spyStore) Watch(context.Context, []string, func(store.Tx) error) error {
	s.calls.Add(1)
	return errSpy
}

// validInput is the documented domain of a decision's input: a non-empty
// key, a cost ≥ 0, a rate in [1, MaxRate], a burst in [0, MaxRate], a period
// of whole milliseconds in [MinPeriod, MaxPeriod], a name of at most
// MaxNameLen bytes.
func validInput(key string, cost int64, l limiter.Limit) bool {
	return key != "" && cost >= 0 &&
		l.Rate >= 1 && l.Rate <= limiter.MaxRate &&
		l.Burst >= 0 && l.Burst <= limiter.MaxRate &&
		l.Period >= limiter.MinPeriod && l.Period <= limiter.MaxPeriod && l.Period%time.Millisecond == 0 &&
		len(l.Name) <= limiter.MaxNameLen
}

// FuzzValidation: whatever the key, cost and limit, a decision either
// refuses the input with ErrInvalidKey, ErrInvalidLimit or ErrInvalidCost
// without sending anything to Redis, or accepts it and asks Redis; it
// accepts exactly the documented domain, for every strategy.
func FuzzValidation(f *testing.F) {
	f.Add("user", int64(1), int64(10), int64(0), int64(time.Second), "")
	f.Add("", int64(1), int64(10), int64(0), int64(time.Second), "n")
	f.Add("u", int64(-1), int64(10), int64(0), int64(time.Second), "")
	f.Add("u", int64(0), int64(0), int64(0), int64(time.Second), "")
	f.Add("u", int64(1), int64(1), int64(-1), int64(time.Millisecond), "")
	f.Add("u", int64(1), int64(1), int64(0), int64(time.Millisecond)+1, "")
	f.Add("u", int64(1), int64(1)<<62, int64(0), int64(1)<<62, "")
	strategies := []limiter.Strategy{strategy.NewFixedWindow(), strategy.NewBucketed(), strategy.NewOptimistic()}
	f.Fuzz(func(t *testing.T, key string, cost, rate, burst, period int64, name string) {
		l := limiter.Limit{Rate: rate, Burst: burst, Period: time.Duration(period), Name: name}
		valid := validInput(key, cost, l)
		for _, s := range strategies {
			spy := &spyStore{}
			lim, err := limiter.New(spy, s)
			if err != nil {
				t.Fatal(err)
			}
			r, err := lim.AllowN(context.Background(), key, cost, l)
			invalid := errors.Is(err, limiter.ErrInvalidKey) || errors.Is(err, limiter.ErrInvalidLimit) || errors.Is(err, limiter.ErrInvalidCost)
			switch {
			case valid && invalid:
				t.Fatalf("%T refused valid input (key %q, cost %d, %+v): %v", s, key, cost, l, err)
			case !valid && !invalid:
				t.Fatalf("%T accepted invalid input (key %q, cost %d, %+v): %+v, %v", s, key, cost, l, r, err)
			case invalid && spy.calls.Load() != 0:
				t.Fatalf("%T refused the input but sent %d calls to Redis first", s, spy.calls.Load())
			case invalid && (r.Allowed || r.Degraded):
				t.Fatalf("%T refused the input with result %+v", s, r)
			case valid && spy.calls.Load() == 0:
				t.Fatalf("%T accepted the input (%v) without asking Redis", s, err)
			}
		}
	})
}
