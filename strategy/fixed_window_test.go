package strategy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// TestFixedWindowCountsFirst walks the paths on which FixedWindow's script
// counts first and takes back (a call that writes a cost every limit can
// fit), on miniredis and on a redis-server: exact Remaining, ResetAfter and
// RetryAfter; a denial leaves every counter as it was and no key it
// created; a counter that is no counter (negative, beyond 2^53 - 1, not an
// integer, another type) is ErrCorruptCounter with every key as found.
func TestFixedWindowCountsFirst(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		m, _ := newMini(t)
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
		t.Cleanup(func() { _ = rdb.Close() })
		fixedWindowCountsFirst(t, rdb)
	})
	t.Run("redis-server", func(t *testing.T) { fixedWindowCountsFirst(t, realServer(t)) })
}

func fixedWindowCountsFirst(t *testing.T, rdb *redis.Client) {
	ctx := context.Background()
	lim := newLim(t, goredis.New(rdb), strategy.NewFixedWindow())
	perMin := limiter.PerMinute(5)
	perHour := limiter.PerHour(7)
	key := func(subject string, l limiter.Limit) string {
		k, err := limiter.Key("t", subject, l)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	value := func(k string) string {
		v, err := rdb.Get(ctx, k).Result()
		if errors.Is(err, redis.Nil) {
			return "(none)"
		} else if err != nil {
			t.Fatal(err)
		}
		return v
	}
	call := func(name, subject string, cost int64, allowed bool, remaining int64, retry bool, ls ...limiter.Limit) limiter.Result {
		t.Helper()
		r, err := lim.AllowN(ctx, subject, cost, ls...)
		if err != nil || r.Allowed != allowed || r.Remaining != remaining {
			t.Fatalf("%s: AllowN(%d) = %+v, %v; want allowed %v, remaining %d", name, cost, r, err, allowed, remaining)
		}
		if r.ResetAfter <= 0 || r.ResetAfter > time.Hour {
			t.Errorf("%s: ResetAfter %s, want within (0, 1h]", name, r.ResetAfter)
		}
		if retry != (r.RetryAfter > 0) || r.RetryAfter > time.Hour {
			t.Errorf("%s: RetryAfter %s, want > 0: %v", name, r.RetryAfter, retry)
		}
		return r
	}

	// One limit.
	call("first", "one", 2, true, 3, false, perMin)
	if ttl := rdb.PTTL(ctx, key("one", perMin)).Val(); ttl <= 59*time.Second || ttl > time.Minute {
		t.Errorf("a new counter's TTL is %s, want its window (1m)", ttl)
	}
	call("up to the rate", "one", 3, true, 0, false, perMin)
	call("over", "one", 1, false, 0, true, perMin)
	if v := value(key("one", perMin)); v != "5" {
		t.Errorf("after a denial the counter is %q, want 5 (taken back)", v)
	}

	// Two limits: the hour binds first.
	r := call("two", "two", 4, true, 1, false, perMin, perHour)
	if r.Limit != perMin {
		t.Errorf("two: binding limit %v, want %v", r.Limit, perMin)
	}
	r = call("hour binds", "two", 1, true, 0, false, perMin, perHour)
	if r.Remaining != 0 {
		t.Errorf("hour binds: %+v", r)
	}
	// Another subject whose minute counter is new while its hour is full:
	// the denial deletes the counter it created.
	if err := rdb.Set(ctx, key("three", perHour), "7", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	r = call("denied by the hour", "three", 1, false, 0, true, perMin, perHour)
	if r.Limit != perHour || r.RetryAfter <= 59*time.Minute {
		t.Errorf("denied by the hour: %+v; want the hour binding, RetryAfter about 1h", r)
	}
	if v := value(key("three", perMin)); v != "(none)" {
		t.Errorf("the minute counter a denial created is %q, want none", v)
	}
	if v := value(key("three", perHour)); v != "7" {
		t.Errorf("the hour counter after a denial is %q, want 7", v)
	}

	// Counters that are no counters: one limit, and the second of two (the
	// first new, the second existing and new in turn).
	for _, bad := range []string{"-3", "9007199254740993", "1.5", "hash"} {
		for _, ls := range [][]limiter.Limit{{perMin}, {perMin, perHour}} {
			subject := "bad-" + bad
			victim := key(subject, ls[len(ls)-1])
			if err := rdb.Del(ctx, key(subject, perMin), key(subject, perHour)).Err(); err != nil {
				t.Fatal(err)
			}
			if bad == "hash" {
				err := rdb.HSet(ctx, victim, "f", "1").Err()
				if err != nil {
					t.Fatal(err)
				}
			} else if err := rdb.Set(ctx, victim, bad, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			r, err := lim.AllowN(ctx, subject, 1, ls...)
			if !errors.Is(err, limiter.ErrCorruptCounter) {
				t.Errorf("%d limits, counter %q: %+v, %v; want ErrCorruptCounter", len(ls), bad, r, err)
			}
			if bad != "hash" {
				if v := value(victim); v != bad {
					t.Errorf("%d limits: the counter %q became %q", len(ls), bad, v)
				}
			}
			if len(ls) == 2 {
				if v := value(key(subject, perMin)); v != "(none)" {
					t.Errorf("counter %q in the second limit: the first limit's new counter is %q, want none", bad, v)
				}
			}
		}
	}
}

// TestFixedWindowIntegerReply: the common call's {count, reset_ms} comes
// back as one integer, reset_ms·(2·rate+1) + count, when that fits below
// 2^52, and as the pair otherwise; both read the same, admitted and
// denied, on miniredis and on a redis-server.
func TestFixedWindowIntegerReply(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		m, _ := newMini(t)
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
		t.Cleanup(func() { _ = rdb.Close() })
		fixedWindowIntegerReply(t, rdb)
	})
	t.Run("redis-server", func(t *testing.T) { fixedWindowIntegerReply(t, realServer(t)) })
}

func fixedWindowIntegerReply(t *testing.T, rdb *redis.Client) {
	ctx := context.Background()
	lim := newLim(t, goredis.New(rdb), strategy.NewFixedWindow())
	for _, tc := range []struct {
		name    string
		l       limiter.Limit
		integer bool // the common call's reply is one integer
	}{
		{"small", limiter.Per(3, time.Hour), true},
		// 3 600 000 ms · (2·2^40 + 1) is above 2^52: the pair
		{"large", limiter.Per(1<<40, time.Hour), false},
	} {
		key, err := limiter.Key("t", "int-"+tc.name, tc.l)
		if err != nil {
			t.Fatal(err)
		}
		// The raw reply of a second call (the counter exists).
		raw := func() any {
			v, err := rdb.EvalSha(ctx, strategy.FixedWindowScript().Hash(), []string{key}, 1, 0, tc.l.Rate, tc.l.Period.Milliseconds()).Result()
			if err != nil {
				t.Fatalf("%s: EVALSHA: %v", tc.name, err)
			}
			return v
		}
		if r, err := lim.Allow(ctx, "int-"+tc.name, tc.l); err != nil || !r.Allowed || r.Remaining != tc.l.Rate-1 {
			t.Fatalf("%s: first call %+v, %v; want admitted, %d remaining", tc.name, r, err, tc.l.Rate-1)
		}
		v := raw() // the second unit, counted
		if _, isInt := v.(int64); isInt != tc.integer {
			t.Fatalf("%s: reply %#v; want an integer: %v", tc.name, v, tc.integer)
		}
		if tc.integer {
			m := 2*tc.l.Rate + 1
			n := v.(int64)
			if count, reset := n%m, n/m; count != 2 || reset <= 59*60*1000 || reset > 3600*1000 {
				t.Fatalf("%s: reply %d reads count %d, reset %d ms; want 2 and about an hour", tc.name, n, count, reset)
			}
		}
		r, err := lim.Allow(ctx, "int-"+tc.name, tc.l)
		if err != nil || !r.Allowed || r.Remaining != tc.l.Rate-3 || r.ResetAfter <= 59*time.Minute || r.ResetAfter > time.Hour {
			t.Fatalf("%s: third call %+v, %v; want admitted, %d remaining, reset within the hour", tc.name, r, err, tc.l.Rate-3)
		}
		if tc.l.Rate == 3 {
			r, err := lim.Allow(ctx, "int-"+tc.name, tc.l)
			if err != nil || r.Allowed || r.Remaining != 0 || r.RetryAfter <= 59*time.Minute || r.RetryAfter != r.ResetAfter {
				t.Fatalf("%s: fourth call %+v, %v; want denied until the window's end", tc.name, r, err)
			}
			if n, err := rdb.Get(ctx, key).Int64(); err != nil || n != 3 {
				t.Fatalf("%s: counter %d, %v; want 3 (the denial taken back)", tc.name, n, err)
			}
		}
	}
}
