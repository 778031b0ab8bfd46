package strategy_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/storetest"
	"github.com/quotagate/limiter/strategy"
)

// TestAlignedWindowAllowManyChainedAgain: aligned_window_many.lua's header:
// "every later request that names one of its keys, or of the keys of a
// request answered so after it, is answered so too ... so that the
// requests of one subject are decided in their order". Subject u: ask 0
// [minute], ask 1 [minute, day], ask 2 [day]; the app clock 2 minutes
// behind names a minute window the server is not in (ask 0 goes again),
// but the right day. In order: 0 and 1 admitted (the day's 1 used), 2
// denied.
func TestAlignedWindowAllowManyChainedAgain(t *testing.T) {
	m, st := newMini(t)
	// mid-day (UTC), so that 2 minutes back is the same day
	now := m.Now()
	noon := time.Date(now.Year(), now.Month(), now.Day(), 12, 0, 0, 0, time.UTC)
	if !noon.After(now) {
		noon = noon.Add(24 * time.Hour)
	}
	m.Advance(noon.Sub(now))
	rc := &storetest.Batches{Store: st, One: true}
	var skew atomic.Int64
	clock := func() time.Time { return m.Now().Add(time.Duration(skew.Load())) }
	lim := newLim(t, rc, strategy.NewAlignedWindow(strategy.WithAlignedClock(clock)))
	warmUp(t, lim, rc)
	skew.Store(int64(-2 * time.Minute))
	minute, day := limiter.PerMinute(5), limiter.Limit{Rate: 1, Period: 24 * time.Hour}
	asks := []limiter.Ask{
		{Key: "u", Limits: []limiter.Limit{minute}},
		{Key: "u", Limits: []limiter.Limit{minute, day}},
		{Key: "u", Limits: []limiter.Limit{day}},
	}
	want := []bool{true, true, false}
	for i, a := range lim.AllowMany(context.Background(), asks) {
		if a.Err != nil || a.Result.Allowed != want[i] {
			t.Errorf("ask %d: %+v, %v; want allowed %v", i, a.Result, a.Err, want[i])
		}
	}
}
