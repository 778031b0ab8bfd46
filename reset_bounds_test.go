package limiter_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestResetRefusesWhatTheStrategyRefuses: a limit the strategy refuses
// (its LimitChecker: above what it can hold) is refused by Reset too, as
// by every call, with ErrInvalidLimit and nothing deleted. Reset deleted
// its key, which, for an unnamed limit, is that of the limit of the same
// period in use.
func TestResetRefusesWhatTheStrategyRefuses(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		s         limiter.Strategy
		bad, good limiter.Limit // one key: unnamed, one period
	}{
		{"SlidingLog", strategy.NewSlidingLog(), limiter.PerSecond(20000), limiter.PerSecond(5)},
		{"GCRA", strategy.NewGCRA(), limiter.Per(2000, time.Millisecond), limiter.Per(5, time.Millisecond)},
		{"SlidingWindow", strategy.NewSlidingWindow(), limiter.PerSecond(1 << 27), limiter.PerSecond(5)},
		{"TokenBucket", strategy.NewTokenBucket(), limiter.Limit{Rate: 1, Period: limiter.MaxPeriod, Burst: limiter.MaxRate}, limiter.Limit{Rate: 1, Period: limiter.MaxPeriod, Burst: 5}},
	} {
		m, st := newMini(t)
		lim, err := limiter.New(st, tc.s)
		if err != nil {
			t.Fatal(err)
		}
		if err := lim.CheckLimits(tc.bad); !errors.Is(err, limiter.ErrInvalidLimit) {
			t.Fatalf("%s: CheckLimits(%s) = %v; want ErrInvalidLimit (the test's premise)", tc.name, tc.bad, err)
		}
		if r, err := lim.Allow(ctx, "k", tc.good); err != nil || !r.Allowed {
			t.Fatalf("%s: Allow(%s) = %+v, %v", tc.name, tc.good, r, err)
		}
		before := m.Keys()
		err = lim.Reset(ctx, "k", tc.bad)
		if after := m.Keys(); !errors.Is(err, limiter.ErrInvalidLimit) || !slices.Equal(after, before) {
			t.Errorf("%s: Reset(%s) = %v, keys %q -> %q; want ErrInvalidLimit, nothing deleted", tc.name, tc.bad, err, before, after)
		}
	}
}
