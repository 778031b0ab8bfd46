package strategy_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// failNthMulti fails, unsent, the n-th MULTI ... EXEC round trip it is
// given (n from 1; 0: none) with err, and counts them.
type failNthMulti struct {
	store.Store
	n     atomic.Int64
	fail  atomic.Int64
	err   error
	multi atomic.Int64
}

func (f *failNthMulti) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if len(cmds) > 0 && cmds[0].Name == "MULTI" {
		if f.multi.Add(1) == f.fail.Load() {
			return nil, f.err
		}
	}
	return f.Store.Do(ctx, cmds...)
}

// TestBucketedRestampFails: a call whose first transaction counted in the
// wrong window (its app clock a Period ahead of the server's) sends a
// second one that takes that count back and counts in the server's
// window. When the second fails unsent (a dial refused), the first count
// is taken back before the call returns its error: no window keeps it
// (it was left in the next window's key, eating its quota, with an error
// that said nothing ran). When the second fails with its outcome unknown,
// the call's error says so, and nothing is taken back twice.
func TestBucketedRestampFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		sum  int64 // the counters' sum after the call (1 before it)
	}{
		{"not sent", errors.New("dial tcp: connection refused"), 1},
		{"outcome unknown", store.ErrUnknownOutcome, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, st := newMini(t)
			f := &failNthMulti{Store: st, err: tc.err}
			lim, skew := skewedBucketed(t, m, f)
			l := limiter.PerMinute(100)
			ctx := context.Background()
			if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed {
				t.Fatalf("first call: %+v, %v", r, err)
			}
			// the app clock a Period ahead: the next call is stamped with
			// the next window, the server's TIME names this one
			skew.Store(int64(time.Minute))
			f.fail.Store(f.multi.Load() + 2)
			_, err := lim.Allow(ctx, "u", l)
			if err == nil {
				t.Fatal("the call whose second transaction failed: no error")
			}
			if unknown := errors.Is(err, store.ErrUnknownOutcome); unknown != (tc.sum != 1) {
				t.Errorf("error %v: ErrUnknownOutcome %v; want %v", err, unknown, tc.sum != 1)
			}
			var sum int64
			var keys []string
			for _, k := range m.Keys() {
				if !strings.HasPrefix(k, "t:") {
					continue
				}
				v, _ := m.Get(k)
				n, _ := store.Int64(v)
				sum += n
				keys = append(keys, k+"="+v)
			}
			if sum != tc.sum {
				t.Errorf("counters after the call: %v, sum %d; want %d", keys, sum, tc.sum)
			}
		})
	}
}

// skewedBucketed returns a Limiter of Bucketed on st whose app clock is
// m's virtual one plus the skew returned, which the test moves.
func skewedBucketed(t *testing.T, m *redistest.Mini, st store.Store) (*limiter.Limiter, *atomic.Int64) {
	t.Helper()
	skew := new(atomic.Int64)
	clock := func() time.Time { return m.Now().Add(time.Duration(skew.Load())) }
	return newLim(t, st, strategy.NewBucketed(strategy.WithClock(clock))), skew
}
