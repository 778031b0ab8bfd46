package strategy_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/storetest"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// skewedClock is an app clock: base's reading plus a skew a test changes
// after the strategy has read the server's TIME (a clock set by hand, an
// NTP step).
type skewedClock struct {
	base func() time.Time
	skew atomic.Int64
}

func (c *skewedClock) Now() time.Time { return c.base().Add(time.Duration(c.skew.Load())) }

// epochStrategies are the strategies that name windows from the app clock
// plus its offset to the server's TIME, each given clock c.
func epochStrategies(c *skewedClock) map[string]limiter.Strategy {
	return map[string]limiter.Strategy{
		"AlignedWindow": strategy.NewAlignedWindow(strategy.WithAlignedClock(c.Now)),
		"Bucketed":      strategy.NewBucketed(strategy.WithClock(c.Now)),
	}
}

// A Reset after the app clock jumped deletes the server's windows: it
// names them from the server's clock, not from an estimate that is off.
func TestResetAfterAppClockJump(t *testing.T) {
	for _, name := range []string{"AlignedWindow", "Bucketed"} {
		t.Run(name, func(t *testing.T) {
			m, st := newMini(t)
			m.Advance(250 * time.Millisecond)
			clk := &skewedClock{base: m.Now}
			lim := newLim(t, st, epochStrategies(clk)[name])
			ctx := context.Background()
			l := limiter.PerMinute(2)
			for i := range 2 {
				if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed {
					t.Fatalf("Allow %d: %+v, %v", i, r, err)
				}
			}
			clk.skew.Store(int64(5 * time.Minute))
			if err := lim.Reset(ctx, "u", l); err != nil {
				t.Fatal(err)
			}
			if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed || r.Remaining != 1 {
				t.Fatalf("Allow after a Reset in the same server window = %+v, %v (keys after the Reset: %q); want admitted, 1 remaining", r, err, m.Keys())
			}
		})
	}
}

// A read (Peek, a cost above the rate) names its windows from the
// estimate as a count does; a window it finds no counter in, the server's
// clock not in it, says nothing of the count, and the read goes again for
// the server's window.
func TestAlignedReadAfterAppClockJump(t *testing.T) {
	for _, skew := range []time.Duration{5 * time.Minute, -5 * time.Minute} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			m, st := newMini(t)
			m.Advance(250 * time.Millisecond)
			clk := &skewedClock{base: m.Now}
			lim := newLim(t, st, strategy.NewAlignedWindow(strategy.WithAlignedClock(clk.Now)))
			ctx := context.Background()
			l := limiter.PerMinute(2)
			for i := range 2 {
				if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed {
					t.Fatalf("Allow %d: %+v, %v", i, r, err)
				}
			}
			clk.skew.Store(int64(skew))
			p, err := lim.Peek(ctx, "u", l)
			if err != nil || p.Allowed || p.Remaining != 0 || p.Cause != nil {
				t.Fatalf("Peek with 2 of 2 used in the server's window = %+v, %v; want denied, 0 remaining", p, err)
			}
			r, err := lim.AllowN(ctx, "u", 3, l) // never fits: a read
			if err != nil || r.Allowed || r.Remaining != 0 || r.RetryAfter != -1 {
				t.Fatalf("AllowN(3) of a 2 per minute limit = %+v, %v; want denied, 0 remaining, RetryAfter -1", r, err)
			}
			if keys := m.Keys(); len(keys) != 1 {
				t.Fatalf("keys %q; want the server window's counter alone (a read writes nothing)", keys)
			}
		})
	}
}

// On a redis-server, with the system clock jumping 2 hours ahead.
func TestAlignedReadResetAfterAppClockJumpRedis(t *testing.T) {
	rdb := realServer(t)
	clk := &skewedClock{base: time.Now}
	lim := newLim(t, goredis.New(rdb), strategy.NewAlignedWindow(strategy.WithAlignedClock(clk.Now)))
	ctx := context.Background()
	l := limiter.PerHour(2)
	if time.Until(epochWindowEnd(l.Period)) < 10*time.Second {
		time.Sleep(time.Until(epochWindowEnd(l.Period)) + 10*time.Millisecond)
	}
	for i := range 2 {
		if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed {
			t.Fatalf("Allow %d: %+v, %v", i, r, err)
		}
	}
	clk.skew.Store(int64(2 * time.Hour))
	if p, err := lim.Peek(ctx, "u", l); err != nil || p.Allowed || p.Remaining != 0 {
		t.Errorf("Peek with 2 of 2 used in the server's window = %+v, %v; want denied, 0 remaining", p, err)
	}
	if err := lim.Reset(ctx, "u", l); err != nil {
		t.Fatal(err)
	}
	keys, _ := rdb.Keys(ctx, "t:*").Result()
	if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed || r.Remaining != 1 {
		t.Errorf("Allow after Reset = %+v, %v (keys the Reset left: %q); want admitted, 1 remaining", r, err, keys)
	}
}

// AllowMany answers a read that follows a request of the same subject sent
// for another window than the server's as AllowN does, with or without
// the many-request script.
func TestAlignedManyReadAfterMovedAsk(t *testing.T) {
	for _, one := range []bool{true, false} {
		t.Run(fmt.Sprint("many-request script=", one), func(t *testing.T) {
			m, st := newMini(t)
			m.Advance(250 * time.Millisecond)
			rc := &storetest.Batches{Store: st, One: one}
			clk := &skewedClock{base: m.Now}
			lim := newLim(t, rc, strategy.NewAlignedWindow(strategy.WithAlignedClock(clk.Now)))
			ctx := context.Background()
			warmUp(t, lim, rc)
			clk.skew.Store(int64(5 * time.Minute))
			l := limiter.PerMinute(3)
			ans := lim.AllowMany(ctx, []limiter.Ask{
				{Key: "u", Cost: 1, Limits: []limiter.Limit{l}},
				{Key: "u", Cost: 5, Limits: []limiter.Limit{l}},
			})
			if a := ans[0]; a.Err != nil || !a.Result.Allowed || a.Result.Remaining != 2 {
				t.Errorf("ask 0: %+v; want admitted, 2 remaining", a)
			}
			if a := ans[1]; a.Err != nil || a.Result.Allowed || a.Result.RetryAfter != -1 || a.Result.Remaining != 2 {
				t.Errorf("ask 1 (cost 5 > rate 3): %+v; want denied, RetryAfter -1, 2 remaining (as AllowN answers it)", a)
			}
		})
	}
}

// epochWindowEnd returns the end of the window of period p, aligned to the
// Unix epoch, that the system clock is in.
func epochWindowEnd(p time.Duration) time.Time {
	ms := p.Milliseconds()
	return time.UnixMilli((time.Now().UnixMilli()/ms + 1) * ms)
}
