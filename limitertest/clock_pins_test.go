package limitertest_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/limitertest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// serverTime reads Redis TIME through st.
func serverTime(t *testing.T, st store.Store) time.Time {
	t.Helper()
	rs, err := st.Do(context.Background(), store.Cmd{Name: "TIME"})
	if err != nil || rs[0].Err != nil {
		t.Fatal(err, rs)
	}
	arr, err := store.Slice(rs[0].Val)
	if err != nil || len(arr) != 2 {
		t.Fatal(arr, err)
	}
	sec, _ := store.String(arr[0])
	usec, _ := store.String(arr[1])
	s, _ := strconv.ParseInt(sec, 10, 64)
	u, _ := strconv.ParseInt(usec, 10, 64)
	return time.Unix(s, u*1000)
}

// TestClockIsServerTIME: "Redis TIME and key expiry move together, and
// only through Advance": TIME is Now from the start and after Advance.
func TestClockIsServerTIME(t *testing.T) {
	st, clock := limitertest.Store(t)
	if got, want := serverTime(t, st), clock.Now(); !got.Equal(want) {
		t.Errorf("TIME = %v at the start, want the clock's %v", got, want)
	}
	clock.Advance(90 * time.Minute)
	if got, want := serverTime(t, st), clock.Now(); !got.Equal(want) {
		t.Errorf("TIME = %v after Advance, want the clock's %v", got, want)
	}
}

// TestNewOptionsApplyAfterDefaults: "opts apply after the defaults": a
// test's own WithSleep replaces the one that advances the clock.
func TestNewOptionsApplyAfterDefaults(t *testing.T) {
	var clock *limitertest.Clock
	mine := 0
	lim, c := limitertest.New(t, strategy.NewGCRA(), limiter.WithSleep(func(ctx context.Context, d time.Duration) error {
		mine++
		clock.Advance(d)
		return ctx.Err()
	}))
	clock = c
	ctx := context.Background()
	l := limiter.Per(1, time.Hour)
	if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed {
		t.Fatal(r, err)
	}
	if r, err := lim.Wait(ctx, "u", l); err != nil || !r.Allowed {
		t.Fatal(r, err)
	}
	if mine == 0 {
		t.Error("Wait did not sleep with the test's WithSleep: the default replaced it")
	}
}
