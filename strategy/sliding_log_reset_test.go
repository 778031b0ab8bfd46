package strategy_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// TestSlidingLogResetAfterOnServer: on a redis-server, whose clock has
// microseconds (miniredis' virtual one moves by whole milliseconds), a
// denial's and a Peek's ResetAfter is the time until the log's newest unit
// leaves the window, rounded up: with one unit in a log of 1 per 10 s,
// exactly its RetryAfter, and at least what the unit's score and the
// server's clock after the call say. Read from the key's PTTL, in whole
// milliseconds, it came out 1 ms short in about a quarter of the calls,
// shorter than RetryAfter.
func TestSlidingLogResetAfterOnServer(t *testing.T) {
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	lim, err := limiter.New(goredis.New(rdb), strategy.NewSlidingLog(), limiter.WithPrefix("t"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l := limiter.Per(1, 10*time.Second)
	short := 0
	for i := range 200 {
		subject := fmt.Sprint("s", i)
		if r, err := lim.Allow(ctx, subject, l); err != nil || !r.Allowed {
			t.Fatalf("%s: first call %+v, %v; want admitted", subject, r, err)
		}
		time.Sleep(time.Duration(i%7) * 150 * time.Microsecond) // another sub-millisecond
		denied, err := lim.Allow(ctx, subject, l)
		if err != nil || denied.Allowed {
			t.Fatalf("%s: second call %+v, %v; want denied", subject, denied, err)
		}
		peek, err := lim.Peek(ctx, subject, l)
		if err != nil {
			t.Fatalf("%s: Peek: %v", subject, err)
		}
		after, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		key, _ := limiter.Key("t", subject, l)
		zs, err := rdb.ZRangeWithScores(ctx, key, -1, -1).Result()
		if err != nil || len(zs) != 1 {
			t.Fatalf("%s: the log: %v, %v; want one unit", subject, zs, err)
		}
		// the calls ran before after: the unit leaves the window at least
		// this many ms after them
		least := (int64(zs[0].Score) + l.Period.Microseconds() - after.UnixMicro() + 999) / 1000
		for _, c := range []struct {
			what string
			r    limiter.Result
		}{{"denial", denied}, {"Peek", peek}} {
			if c.r.ResetAfter != c.r.RetryAfter || c.r.ResetAfter.Milliseconds() < least {
				short++
				if short <= 5 {
					t.Errorf("%s: %s with one unit in the log: ResetAfter %s, RetryAfter %s; want them equal, at least %d ms (the unit at %d µs, the server's clock %d µs after the call)", subject, c.what, c.r.ResetAfter, c.r.RetryAfter, least, int64(zs[0].Score), after.UnixMicro())
				}
			}
		}
	}
	if short > 0 {
		t.Errorf("%d of 400 denials and Peeks had a ResetAfter short of the log's end", short)
	}
}
