package strategy_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestCheckLimitMatchesDecide: a limit CheckLimits refuses is the one every
// call refuses (before any I/O), and one it accepts is decided; a rule set
// loader relies on it to keep such a limit out of force.
func TestCheckLimitMatchesDecide(t *testing.T) {
	_, st := newMini(t)
	cases := []struct {
		s           limiter.Strategy
		bad, good   limiter.Limit
		implemented bool
	}{
		{strategy.NewSlidingLog(), limiter.PerDay(30_000), limiter.PerDay(10_000), true},
		{strategy.NewTokenBucket(), limiter.PerDay(30_000), limiter.PerDay(26_000), true},
		{strategy.NewGCRA(), limiter.Per(2000, time.Millisecond), limiter.Per(1000, time.Millisecond), true},
		{strategy.NewSlidingWindow(), limiter.Per(limiter.MaxRate, 31*24*time.Hour), limiter.PerDay(1_000_000), true},
		{strategy.NewFixedWindow(), limiter.Limit{}, limiter.Per(limiter.MaxRate, 31*24*time.Hour), false},
		{strategy.NewAlignedWindow(), limiter.Limit{}, limiter.Per(limiter.MaxRate, 31*24*time.Hour), false},
	}
	ctx := context.Background()
	for i, c := range cases {
		lim, err := limiter.New(st, c.s, limiter.WithPrefix(strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := c.s.(limiter.LimitChecker); ok != c.implemented {
			t.Errorf("%T implements LimitChecker = %v; want %v", c.s, ok, c.implemented)
		}
		if err := lim.CheckLimits(c.good); err != nil {
			t.Errorf("%T: CheckLimits(%s) = %v; want nil", c.s, c.good, err)
		}
		if _, err := lim.Allow(ctx, "ok", c.good); err != nil {
			t.Errorf("%T: Allow(%s) = %v; want a decision", c.s, c.good, err)
		}
		if !c.implemented {
			continue
		}
		err = lim.CheckLimits(c.good, c.bad)
		_, callErr := lim.Allow(ctx, "bad", c.bad)
		if !errors.Is(err, limiter.ErrInvalidLimit) || !errors.Is(callErr, limiter.ErrInvalidLimit) {
			t.Errorf("%T, %s: CheckLimits = %v, Allow = %v; want ErrInvalidLimit from both", c.s, c.bad, err, callErr)
		}
	}
	lim, err := limiter.New(st, strategy.NewFixedWindow())
	if err != nil {
		t.Fatal(err)
	}
	if err := lim.CheckLimits(limiter.Limit{Rate: 0, Period: time.Second}); !errors.Is(err, limiter.ErrInvalidLimit) {
		t.Errorf("CheckLimits(rate 0) = %v; want ErrInvalidLimit", err)
	}
}
