package strategy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

func pinSetup(t *testing.T, s limiter.Strategy) (*limiter.Limiter, *redis.Client, func(time.Duration)) {
	t.Helper()
	m, st := newMini(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return newLim(t, st, s), rdb, m.Advance
}

func pinKey(t *testing.T, l limiter.Limit) string {
	t.Helper()
	k, err := limiter.Key("t", "x", l)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var countingStrategies = []struct {
	name string
	s    func() limiter.Strategy
}{
	{"FixedWindow", func() limiter.Strategy { return strategy.NewFixedWindow() }},
	{"Optimistic", func() limiter.Strategy { return strategy.NewOptimistic() }},
}

// FixedWindow and Optimistic: a counter found without expiry, or with one
// further than its Period, is expired one Period from the next writing call.
// A call with a cost above the rate is a writing call (cost > 0, not a peek).
func TestCostAboveRateRepairsTTL(t *testing.T) {
	ctx := context.Background()
	l := limiter.PerSecond(3)
	for _, tc := range countingStrategies {
		for _, ttl := range []time.Duration{-1, time.Hour} {
			lim, rdb, _ := pinSetup(t, tc.s())
			k := pinKey(t, l)
			if ttl < 0 {
				rdb.Set(ctx, k, "1", 0)
			} else {
				rdb.Set(ctx, k, "1", ttl)
			}
			r, err := lim.AllowN(ctx, "x", 5, l)
			if err != nil || r.Allowed || r.RetryAfter != -1 {
				t.Fatalf("%s: %+v %v", tc.name, r, err)
			}
			if r.ResetAfter != time.Second {
				t.Errorf("%s ttl %v: ResetAfter %v, want 1s (repaired)", tc.name, ttl, r.ResetAfter)
			}
			if p := rdb.PTTL(ctx, k).Val(); p <= 0 || p > time.Second {
				t.Errorf("%s ttl %v: PTTL after a writing call = %v, want (0, 1s]", tc.name, ttl, p)
			}
		}
	}
}

// a TTL further than its Period (here by 1 ms) is repaired by the next
// writing call, expiring it one Period from then.
func TestTTLOneMsTooLongRepaired(t *testing.T) {
	ctx := context.Background()
	l := limiter.PerSecond(5)
	for _, tc := range countingStrategies {
		for _, two := range []bool{false, true} {
			lim, rdb, _ := pinSetup(t, tc.s())
			k := pinKey(t, l)
			rdb.Set(ctx, k, "1", 1001*time.Millisecond)
			ls := []limiter.Limit{l}
			if two {
				ls = append(ls, limiter.PerHour(100))
			}
			r, err := lim.Allow(ctx, "x", ls...)
			if err != nil || !r.Allowed {
				t.Fatal(r, err)
			}
			if p := rdb.PTTL(ctx, k).Val(); p > time.Second {
				t.Errorf("%s two=%v: PTTL %v after a write, want <= 1s", tc.name, two, p)
			}
		}
	}
}

// a counter that is not a non-negative decimal integer, at most
// 2^53-1, is ErrCorruptCounter and the call leaves every counter as found.
func TestCorruptCountersLeftAsFound(t *testing.T) {
	ctx := context.Background()
	l, l2 := limiter.PerSecond(5), limiter.PerHour(100)
	cases := []struct {
		name  string
		val   string
		cost  int64
		peek  bool
		multi bool
	}{
		{"negative, cost 2, one limit", "-1", 2, false, false},
		{"negative, two limits", "-5", 1, false, true},
		{"2^53, peek", "9007199254740992", 1, true, false},
		{"2^53, peek, two limits", "9007199254740992", 1, true, true},
	}
	for _, tc := range countingStrategies {
		for _, c := range cases {
			lim, rdb, _ := pinSetup(t, tc.s())
			k := pinKey(t, l)
			rdb.Set(ctx, k, c.val, time.Minute)
			ls := []limiter.Limit{l}
			if c.multi {
				ls = []limiter.Limit{l2, l}
			}
			var err error
			if c.peek {
				_, err = lim.Peek(ctx, "x", ls...)
			} else {
				_, err = lim.AllowN(ctx, "x", c.cost, ls...)
			}
			if !errors.Is(err, limiter.ErrCorruptCounter) {
				t.Errorf("%s %s: err %v, want ErrCorruptCounter", tc.name, c.name, err)
			}
			if v := rdb.Get(ctx, k).Val(); v != c.val {
				t.Errorf("%s %s: counter %q, want %q as found", tc.name, c.name, v, c.val)
			}
			if c.multi {
				if n := rdb.Exists(ctx, pinKey(t, l2)).Val(); n != 0 {
					t.Errorf("%s %s: the other limit's counter was written", tc.name, c.name)
				}
			}
		}
	}
}

// Bucketed: key lifetime is the window's end plus a grace (default
// 1 s), capped at one Period per limit.
func TestBucketedGraceCappedAtPeriod(t *testing.T) {
	ctx := context.Background()
	l := limiter.Per(5, 100*time.Millisecond)
	lim, rdb, _ := pinSetup(t, strategy.NewBucketed())
	if r, err := lim.Allow(ctx, "x", l); err != nil || !r.Allowed {
		t.Fatal(r, err)
	}
	keys := rdb.Keys(ctx, "t:*").Val()
	if len(keys) != 1 {
		t.Fatal(keys)
	}
	if p := rdb.PTTL(ctx, keys[0]).Val(); p <= 0 || p > 200*time.Millisecond {
		t.Errorf("PTTL %v, want (0, 200ms]: window end + grace capped at the Period", p)
	}
}
