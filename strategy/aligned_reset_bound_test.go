package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/internal/storetest"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// TestAlignedWindowResetWithinServerWindow: an admitted AlignedWindow
// decision that read no clock on the server (one DECR) reports a
// ResetAfter that ends no later than its window on the server's clock,
// even when the app's estimate of that clock is behind it (replies that
// come back 30 ms late put the server's readings 15 ms early): a quota
// lease lives by it (limiter.WindowQuota). The server here runs on this
// machine's clock, so its window ends at the same wall-clock instant.
func TestAlignedWindowResetWithinServerWindow(t *testing.T) {
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	st := storetest.Late(goredis.New(rdb), 30*time.Millisecond)
	lim, err := limiter.New(st, strategy.NewAlignedWindow())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// the script loaded first (a NOSCRIPT fallback would time the script
	// in the second of two round trips, its TIME in their middle)
	if _, err := lim.Allow(ctx, "warm-up", limiter.PerHour(1)); err != nil {
		t.Fatal(err)
	}
	l := limiter.PerMinute(1000)
	if left := time.Until(time.Now().Truncate(time.Minute).Add(time.Minute)); left < 3*time.Second {
		time.Sleep(left + 100*time.Millisecond) // clear of a window's edge
	}
	checked := 0
	for i := range 6 {
		sent := time.Now()
		r, err := lim.Allow(ctx, "late-replies", l)
		if err != nil || !r.Allowed {
			t.Fatalf("call %d: %+v, %v", i, r, err)
		}
		// the window the call was counted in: the server's (this
		// machine's) clock when the call arrived, just after sent
		end := sent.Truncate(time.Minute).Add(time.Minute)
		if time.Until(end) < time.Second {
			continue // the call may have met its window's end: no verdict
		}
		checked++
		t.Logf("call %d: reset %s, to end %s", i, r.ResetAfter, end.Sub(sent))
		// ResetAfter is whole milliseconds, rounded up from the server's
		// clock: 1 ms of slack
		if over := sent.Add(r.ResetAfter).Sub(end); over > time.Millisecond {
			t.Errorf("call %d: ResetAfter %s from its sending ends %s after its window on the server", i, r.ResetAfter, over)
		}
	}
	if checked < 3 {
		t.Fatalf("only %d of 6 calls far enough from a window's edge to check", checked)
	}
}
