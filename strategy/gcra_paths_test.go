package strategy_test

import (
	"context"
	"errors"
	"math/rand"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// TestGCRAFastVsGeneral runs the same random sequence on one subject
// with one limit (the fast path where it applies) and on another subject
// with the same limit plus a second that never binds (always the general
// path), on miniredis' virtual clock, and compares the results.
func TestGCRAFastVsGeneral(t *testing.T) {
	for seed := int64(1); seed <= 12; seed++ {
		m, st := newMini(t)
		lim := newLim(t, st, strategy.NewGCRA())
		ctx := context.Background()
		rng := rand.New(rand.NewSource(seed))
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		never := limiter.Limit{Rate: 1_000_000, Period: time.Hour, Name: "never"}
		limits := []limiter.Limit{
			{Rate: 10, Period: time.Second, Burst: 5},
			{Rate: 3, Period: time.Second},
			{Rate: 1000, Period: time.Second, Burst: 7},
			{Rate: 999, Period: time.Second, Burst: 7},
		}
		for step := 0; step < 300; step++ {
			l := limits[rng.Intn(len(limits))]
			switch op := rng.Intn(7); op {
			case 5:
				persistAsGeneral(ctx, rdb, l)
			case 0:
				m.Advance(time.Duration(rng.Intn(300_000)) * time.Microsecond)
			case 1:
				m.Advance(time.Duration(rng.Intn(3)) * time.Millisecond)
			default:
				cost := int64(1)
				if op == 3 {
					cost = int64(1 + rng.Intn(int(l.Rate%7+3)))
				}
				peek := op == 4
				var a, b limiter.Result
				var ea, eb error
				if peek {
					a, ea = lim.Peek(ctx, "one", l)
					b, eb = lim.Peek(ctx, "two", l, never)
				} else {
					a, ea = lim.AllowN(ctx, "one", cost, l)
					b, eb = lim.AllowN(ctx, "two", cost, l, never)
				}
				if ea != nil || eb != nil {
					t.Fatalf("seed %d step %d: %v / %v", seed, step, ea, eb)
				}
				if a.Allowed != b.Allowed || a.Remaining != b.Remaining || a.ResetAfter != b.ResetAfter || a.RetryAfter != b.RetryAfter || b.Index != 0 {
					t.Fatalf("seed %d step %d limit %v cost %d peek %v:\n one limit:  %+v\n two limits: %+v", seed, step, l, cost, peek, a, b)
				}
			}
		}
	}
}

// TestGCRAMixedVersions: during a rolling deploy the script of releases
// before the expiry form (testdata/gcra_before_expiry_state.lua) and this
// one share keys. That script reads any value of up to 16 digits as a TAT
// in microseconds; the expiry form's value, 9·10^15 + the milliseconds
// left, is a date past 2255 to it: the burst used up, so it denies (and
// writes the burst used up), never admits more. Alternating calls between
// an old and a new instance admit at most the limit.
func TestGCRAMixedVersions(t *testing.T) {
	old := earlierRelease(t, "gcra_before_expiry_state.lua")
	_, mst := newMini(t)
	for _, tc := range []struct {
		name string
		st   store.Store
	}{{"miniredis", mst}, {"redis-server", goredis.New(realServer(t))}} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st
			lim := newLim(t, st, strategy.NewGCRA())
			ctx := context.Background()
			l := limiter.PerSecond(10) // 100 ms: the expiry form
			key, _ := limiter.Key("t", "mix", l)
			admitted := 0
			for i := 0; i < 10; i++ { // the whole burst through the new script
				if r, err := lim.Allow(ctx, "mix", l); err != nil {
					t.Fatal(err)
				} else if r.Allowed {
					admitted++
				}
			}
			// No time passes: an old instance and a new one, alternating.
			for i := 0; i < 10; i++ {
				nums, err := old.RunInt64s(ctx, st, []string{key}, []int64{100_000, 10}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(nums) == 1 { // the packed reply: admitted
					admitted++
				}
				if r, err := lim.Allow(ctx, "mix", l); err != nil {
					t.Fatal(err)
				} else if r.Allowed {
					admitted++
				}
			}
			if admitted > 10 {
				t.Errorf("10/s (burst 10), old and new scripts sharing the key, within a few ms: %d admitted; want at most 10", admitted)
			}
		})
	}
}

// TestGCRANoWriteOnPeekOrDenial: random sequence (rate changes
// between forms, PERSIST, sub-millisecond clock moves); a peek never
// changes the key.
func TestGCRANoWriteOnPeekOrDenial(t *testing.T) {
	for seed := int64(1); seed <= 12; seed++ {
		m, st := newMini(t)
		lim := newLim(t, st, strategy.NewGCRA())
		ctx := context.Background()
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
		rng := rand.New(rand.NewSource(seed))
		limits := []limiter.Limit{
			{Rate: 10, Period: time.Second, Burst: 5},
			{Rate: 3, Period: time.Second},
			{Rate: 1000, Period: time.Second, Burst: 7},
			{Rate: 999, Period: time.Second, Burst: 7},
		}
		key, _ := limiter.Key("t", "s", limits[0])
		snap := func() (string, time.Duration) {
			v, _ := rdb.Get(ctx, key).Result()
			return v, rdb.PTTL(ctx, key).Val()
		}
		for step := 0; step < 300; step++ {
			l := limits[rng.Intn(len(limits))]
			switch op := rng.Intn(7); op {
			case 0:
				m.Advance(time.Duration(rng.Intn(300_000)) * time.Microsecond)
			case 1:
				rdb.Persist(ctx, key)
			default:
				cost := int64(1)
				if op == 3 {
					cost = int64(1 + rng.Intn(6))
				}
				v0, ttl0 := snap()
				var r limiter.Result
				var err error
				if op == 4 {
					r, err = lim.Peek(ctx, "s", l)
				} else {
					r, err = lim.AllowN(ctx, "s", cost, l)
				}
				if err != nil {
					t.Fatal(err)
				}
				v1, ttl1 := snap()
				if op == 4 && (v0 != v1 || ttl0 != ttl1) {
					t.Fatalf("seed %d step %d: peek %v changed the key: %q %s -> %q %s", seed, step, l, v0, ttl0, v1, ttl1)
				}
				_ = r // denials that changed a key were all clamp repairs (a burst lowered) or no-TTL repairs
			}
		}
		rdb.Close()
	}
}

// TestGCRALargeBurstReply: the fast path's table reply (packed value
// at or above 2^52) against the general path.
func TestGCRALargeBurstReply(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewGCRA())
	ctx := context.Background()
	never := limiter.Limit{Rate: 1_000_000, Period: time.Hour, Burst: 500_000_000_000, Name: "never"}
	for _, l := range []limiter.Limit{
		{Rate: 1000, Period: time.Second, Burst: 100_000_000},   // 1 ms interval
		{Rate: 999, Period: time.Second, Burst: 100_000_000},    // 1002 µs
		{Rate: 1000, Period: time.Second, Burst: 3_000_000_000}, // 1 ms, burst 3e9
		{Rate: 100, Period: time.Second, Burst: 300_000_000},    // 10 ms, burst 3e8 (n up to 3e9 ms)
	} {
		for _, cost := range []int64{1, 50_000_000, 40_000_000, 9_999_999, 1} {
			a, ea := lim.AllowN(ctx, "one", cost, l)
			b, eb := lim.AllowN(ctx, "two", cost, l, never)
			if ea != nil || eb != nil || a.Allowed != b.Allowed || a.Remaining != b.Remaining || a.ResetAfter != b.ResetAfter || a.RetryAfter != b.RetryAfter {
				t.Errorf("%v cost %d:\n one: %+v %v\n two: %+v %v", l, cost, a, ea, b, eb)
			}
			m.Advance(1500 * time.Microsecond)
		}
		lim.Reset(ctx, "one", l)
		lim.Reset(ctx, "two", l, never)
	}
}

// TestGCRAFastVsGeneralRealServer: the fast-vs-general comparison on
// a redis-server (real clock: ResetAfter/RetryAfter compared within the
// time the calls took, plus 2 ms).
func TestGCRAFastVsGeneralRealServer(t *testing.T) {
	rdb := realServer(t)
	lim := newLim(t, goredis.New(rdb), strategy.NewGCRA())
	ctx := context.Background()
	never := limiter.Limit{Rate: 1_000_000, Period: time.Hour, Name: "never"}
	limits := []limiter.Limit{
		{Rate: 10, Period: time.Minute, Burst: 5},
		{Rate: 7, Period: time.Minute},
		{Rate: 1000, Period: time.Minute, Burst: 7},
	}
	// The two calls run one after the other on a real clock, and so did
	// the calls that last set each subject's state from the clock (an
	// earlier step's): their times differ by at most the time between the
	// two calls of this step, plus that of the slowest step so far, plus
	// 2 ms of rounding. (On a loaded machine a step takes milliseconds.)
	var apart, slowest time.Duration
	near := func(a, b time.Duration) bool {
		tol := apart + slowest + 2*time.Millisecond
		return a-b <= tol && b-a <= tol
	}
	rng := rand.New(rand.NewSource(7))
	for step := 0; step < 400; step++ {
		l := limits[rng.Intn(len(limits))]
		switch op := rng.Intn(6); op {
		case 5:
			persistAsGeneral(ctx, rdb, l)
		default:
			cost := int64(1)
			if op == 3 {
				cost = int64(1 + rng.Intn(8))
			}
			var a, b limiter.Result
			var ea, eb error
			start := time.Now()
			if op == 4 {
				a, ea = lim.Peek(ctx, "one", l)
				b, eb = lim.Peek(ctx, "two", l, never)
			} else {
				a, ea = lim.AllowN(ctx, "one", cost, l)
				b, eb = lim.AllowN(ctx, "two", cost, l, never)
			}
			apart = time.Since(start)
			slowest = max(slowest, apart)
			if ea != nil || eb != nil || a.Allowed != b.Allowed || a.Remaining != b.Remaining || !near(a.ResetAfter, b.ResetAfter) || !near(a.RetryAfter, b.RetryAfter) {
				t.Fatalf("step %d %v cost %d op %d, the calls %s apart, the slowest step's %s:\n one: %+v %v\n two: %+v %v", step, l, cost, op, apart, slowest, a, ea, b, eb)
			}
		}
	}
}

// persistAsGeneral strips the TTL of limit l's keys of the subjects "one"
// (decided by the fast path) and "two" (by the general path), "one" given
// the value of "two": the fast path's value is an upper bound of the time
// that was left (TestGCRALostTTLAfterFastPath), above the general path's
// by the time between its writes since its last SET (on a real clock, on
// a loaded machine, milliseconds: one loaded run found 9 ms).
func persistAsGeneral(ctx context.Context, rdb *redis.Client, l limiter.Limit) {
	kOne, _ := limiter.Key("t", "one", l)
	kTwo, _ := limiter.Key("t", "two", l)
	if v, err := rdb.Get(ctx, kTwo).Result(); err == nil {
		rdb.SetXX(ctx, kOne, v, 0)
	}
	rdb.Persist(ctx, kOne)
	rdb.Persist(ctx, kTwo)
}

// TestGCRACorruptAllPathsRealServer: every path (fast ms, fast µs,
// cost 2, peek, two limits), with and without a TTL, on a redis-server:
// ErrCorruptCounter and the key as it was.
func TestGCRACorruptAllPathsRealServer(t *testing.T) {
	rdb := realServer(t)
	lim := newLim(t, goredis.New(rdb), strategy.NewGCRA())
	ctx := context.Background()
	other := limiter.Limit{Rate: 5, Period: time.Hour, Name: "other"}
	for _, l := range []limiter.Limit{limiter.PerSecond(10), limiter.PerSecond(3)} {
		key, _ := limiter.Key("t", "c", l)
		okey, _ := limiter.Key("t", "c", other)
		for _, bad := range []string{"abc", "0", "00000000000000001", "list"} {
			for _, ttl := range []time.Duration{0, 900 * time.Millisecond} {
				for call := 0; call < 4; call++ {
					rdb.Del(ctx, key, okey)
					set := time.Now()
					if bad == "list" {
						rdb.RPush(ctx, key, "x")
					} else {
						rdb.Set(ctx, key, bad, 0)
					}
					if ttl > 0 {
						rdb.PExpire(ctx, key, ttl)
					}
					var err error
					switch call {
					case 0:
						_, err = lim.Allow(ctx, "c", l)
					case 1:
						_, err = lim.AllowN(ctx, "c", 2, l)
					case 2:
						_, err = lim.Peek(ctx, "c", l)
					case 3:
						_, err = lim.Allow(ctx, "c", other, l)
					}
					if !errors.Is(err, limiter.ErrCorruptCounter) {
						t.Errorf("%v %q ttl %s call %d: %v; want ErrCorruptCounter", l, bad, ttl, call, err)
					}
					got := rdb.PTTL(ctx, key).Val()
					// (less by the time since the SET: a loaded machine's)
					if since := time.Since(set); (ttl == 0 && got != -1) || (ttl > 0 && (got > ttl || got < ttl-since-time.Millisecond)) {
						t.Errorf("%v %q ttl %s call %d: TTL now %s, %s after the SET", l, bad, ttl, call, got, since)
					}
					if bad == "list" {
						if v := rdb.LRange(ctx, key, 0, -1).Val(); len(v) != 1 || v[0] != "x" {
							t.Errorf("%v list call %d became %q", l, call, v)
						}
					} else if v, _ := rdb.Get(ctx, key).Result(); v != bad {
						t.Errorf("%v %q call %d became %q", l, bad, call, v)
					}
					if rdb.Exists(ctx, okey).Val() != 0 {
						t.Errorf("%v %q call %d: the other limit's key was written", l, bad, call)
					}
				}
			}
		}
	}
}
