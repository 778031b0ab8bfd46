package strategy_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// TestTokenBucketExact walks a bucket of 3 tokens refilled 1 per 300 ms on
// miniredis' virtual clock: exact RetryAfter, ResetAfter, Remaining, the
// state (an interval of whole milliseconds: "<ms missing>/<rate>/<period
// µs>/<burst>", the key's expiry the time until full) and the expiry when
// full.
func TestTokenBucketExact(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewTokenBucket())
	ctx := context.Background()
	l := limiter.Limit{Rate: 10, Period: 3 * time.Second, Burst: 3} // a token every 300 ms
	key, _ := limiter.Key("t", "b", l)
	if r, err := lim.AllowN(ctx, "b", 3, l); err != nil || !r.Allowed || r.Remaining != 0 || r.ResetAfter != 900*time.Millisecond {
		t.Fatalf("AllowN(3) = %+v, %v; want admitted, 0 left, full in 900ms", r, err)
	}
	if ttl := pttl(t, m, key); ttl != 900*time.Millisecond {
		t.Errorf("TTL %s, want 900ms (until full)", ttl)
	}
	if v, _ := m.Get(key); v != "900/10/3000000/3" {
		t.Errorf("state %q, want 900/10/3000000/3: 900 ms missing, 10 per 3 s (a token every 300 ms), 3 at most", v)
	}
	r, err := lim.Allow(ctx, "b", l)
	if err != nil || r.Allowed || r.RetryAfter != 300*time.Millisecond {
		t.Fatalf("empty bucket = %+v, %v; want retry after 300ms", r, err)
	}
	m.Advance(299 * time.Millisecond)
	if r, err := lim.Allow(ctx, "b", l); err != nil || r.Allowed || r.RetryAfter != time.Millisecond {
		t.Fatalf("after 299ms = %+v, %v; want retry after 1ms", r, err)
	}
	m.Advance(time.Millisecond)
	if r, err := lim.Allow(ctx, "b", l); err != nil || !r.Allowed || r.Remaining != 0 {
		t.Fatalf("after 300ms = %+v, %v; want admitted", r, err)
	}
	if r, err := lim.AllowN(ctx, "b", 4, l); err != nil || r.Allowed || r.RetryAfter != -1 {
		t.Fatalf("cost 4 in a bucket of 3 = %+v, %v; want never", r, err)
	}
	m.Advance(450 * time.Millisecond)
	if r, err := lim.Peek(ctx, "b", l); err != nil || !r.Allowed || r.Remaining != 1 || r.ResetAfter != 450*time.Millisecond {
		t.Fatalf("peek after 450ms = %+v, %v; want 1.5 tokens (1 whole), full in 450ms", r, err)
	}
	m.Advance(time.Second)
	if r, err := lim.AllowN(ctx, "b", 3, l); err != nil || !r.Allowed {
		t.Fatalf("a full bucket = %+v, %v", r, err)
	}
	if v, _ := m.Get(key); v != "900/10/3000000/3" {
		t.Errorf("state %q, want 900/10/3000000/3", v)
	}
	if ttl := pttl(t, m, key); ttl != 900*time.Millisecond {
		t.Errorf("TTL %s, want 900ms (until full)", ttl)
	}
	m.Advance(900 * time.Millisecond)
	if m.Exists(key) {
		t.Errorf("a full bucket's key outlived its expiry")
	}
}

// TestTokenBucketMicrosecondForm walks a bucket of 3 tokens refilled 3 per
// second (a token every 333 333.3 µs: no whole milliseconds) on miniredis'
// virtual clock: the state is 9·10^15 + the expiry it was written with (in
// ms, the time until full rounded up), the tokens then in units of 1/10^6
// of a token, and the period; the RetryAfter and ResetAfter rounded up to
// the millisecond.
func TestTokenBucketMicrosecondForm(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewTokenBucket())
	ctx := context.Background()
	l := limiter.Limit{Rate: 3, Period: time.Second}
	key, _ := limiter.Key("t", "b", l)
	if r, err := lim.AllowN(ctx, "b", 3, l); err != nil || !r.Allowed || r.Remaining != 0 || r.ResetAfter != time.Second {
		t.Fatalf("AllowN(3) = %+v, %v; want admitted, 0 left, full in 1s", r, err)
	}
	if v, _ := m.Get(key); v != "9000000000001000:0:1000000" {
		t.Errorf("state %q, want 9000000000001000:0:1000000: full in 1000 ms, no token, the period in µs", v)
	}
	if ttl := pttl(t, m, key); ttl != time.Second {
		t.Errorf("TTL %s, want 1s (until full)", ttl)
	}
	// 333 ms (1000 - PTTL): 999 000 of the 1 000 000 units a token needs,
	// the rest in 334 µs: 1 ms
	m.Advance(333 * time.Millisecond)
	if r, err := lim.Allow(ctx, "b", l); err != nil || r.Allowed || r.RetryAfter != time.Millisecond || r.ResetAfter != 667*time.Millisecond {
		t.Fatalf("after 333ms = %+v, %v; want denied, retry after 1ms, full in 667ms", r, err)
	}
	m.Advance(time.Millisecond)
	if r, err := lim.Allow(ctx, "b", l); err != nil || !r.Allowed || r.Remaining != 0 || r.ResetAfter != time.Second {
		t.Fatalf("after 334ms = %+v, %v; want admitted, full in 1s (999.3 ms, rounded up)", r, err)
	}
	// the 2000 units over a token that came back are kept
	if v, _ := m.Get(key); v != "9000000000001000:2000:1000000" {
		t.Errorf("state %q, want 9000000000001000:2000:1000000", v)
	}
	if ttl := pttl(t, m, key); ttl != time.Second {
		t.Errorf("TTL %s, want 1s (until full, rounded up)", ttl)
	}
	// 999 ms later: 2000 + 999·3000 units, 2 999 000 of 3 000 000 (PTTL
	// 1): not full, 2 tokens; 1 ms more and the key has expired, full
	m.Advance(999 * time.Millisecond)
	if r, err := lim.Peek(ctx, "b", l); err != nil || r.Remaining != 2 || r.ResetAfter != time.Millisecond {
		t.Fatalf("after 999ms = %+v, %v; want 2 left, full in 1ms", r, err)
	}
	m.Advance(time.Millisecond)
	if m.Exists(key) {
		t.Errorf("a full bucket's key outlived its expiry")
	}
}

// TestTokenBucketMicrosecondExpiry: a bucket of an interval that is not
// whole milliseconds (3/s, burst 30: full from empty in 10 s) keeps its
// key's expiry while that covers the time until full, and records the TTL
// it kept in its value; else its expiry becomes twice the time until full,
// at most the time to fill from empty (a new bucket's: the time until
// full). Each step's value, TTL and reply are exact.
func TestTokenBucketMicrosecondExpiry(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewTokenBucket())
	ctx := context.Background()
	l := limiter.Limit{Rate: 3, Period: time.Second, Burst: 30}
	key, _ := limiter.Key("t", "e", l)
	step := func(what string, l limiter.Limit, remaining int64, reset time.Duration, value string, ttl time.Duration) {
		t.Helper()
		admitsInto(t, what, lim, m, "e", l, remaining, reset, value, ttl)
	}
	// 10^6 units a token, 3000 a millisecond
	step("a new bucket", l, 29, 334*time.Millisecond, "9000000000000334:29000000:1000000", 334*time.Millisecond)
	step("its TTL short of the time until full (667 ms)", l, 28, 667*time.Millisecond, "9000000000001334:28000000:1000000", 1334*time.Millisecond)
	step("its TTL covers the time until full (1000 ms)", l, 27, time.Second, "9000000000001334:27000000:1000000", 1334*time.Millisecond)
	m.Advance(100 * time.Millisecond)
	// 300 000 units back: 27.3 tokens, 26.3 after the call, full in
	// 1233.3 ms, rounded up: the TTL of 1234 ms covers it exactly
	step("100 ms later", l, 26, 1234*time.Millisecond, "9000000000001234:26300000:1000000", 1234*time.Millisecond)
	step("at once again (full in 1567 ms)", l, 25, 1567*time.Millisecond, "9000000000003134:25300000:1000000", 3134*time.Millisecond)
	// full again after 1567 ms: the key lives on, read as full
	m.Advance(1567 * time.Millisecond)
	if r, err := lim.Peek(ctx, "e", l); err != nil || r.Remaining != 30 || r.ResetAfter != 0 {
		t.Fatalf("full again: Peek = %+v, %v; want 30 left, full", r, err)
	}
	step("a full bucket's key that lives on", l, 29, 334*time.Millisecond, "9000000000001567:29000000:1000000", 1567*time.Millisecond)
	// the burst lowered to 3 (full from empty in 1000 ms): a TTL beyond it
	// is not kept; the bucket, capped at 3 tokens, lacks 1 after the call:
	// twice 334 ms
	low := l
	low.Burst = 3
	step("the burst lowered", low, 2, 334*time.Millisecond, "9000000000000668:2000000:1000000", 668*time.Millisecond)
	// never more than the time to fill from empty
	for i := range 2 {
		if _, err := lim.Allow(ctx, "e", low); err != nil {
			t.Fatal(err)
		}
		if got := pttl(t, m, key); got > time.Second {
			t.Errorf("call %d at burst 3: TTL %s, beyond the time to fill from empty (1s)", i, got)
		}
	}
}

// TestTokenBucketRefusals: limits it cannot hold exactly are refused
// before I/O; a corrupt bucket writes nothing; a denial by one limit takes
// nothing from the other.
func TestTokenBucketRefusals(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewTokenBucket())
	ctx := context.Background()
	if _, err := lim.Allow(ctx, "x", limiter.Limit{Rate: 1, Period: limiter.MaxPeriod, Burst: 1 << 20}); !errors.Is(err, limiter.ErrInvalidLimit) {
		t.Errorf("burst × period above 2^51: %v; want ErrInvalidLimit", err)
	}
	a, b := limiter.PerSecond(5), limiter.PerMinute(2)
	for i := range 3 {
		if r, err := lim.Allow(ctx, "m", a, b); err != nil || r.Allowed != (i < 2) {
			t.Fatalf("call %d: %+v, %v", i, r, err)
		}
	}
	if r, err := lim.Peek(ctx, "m", a); err != nil || r.Remaining != 3 {
		t.Errorf("5/s after two admitted and one denied by 2/min: %+v, %v; want 3 left", r, err)
	}
	kb, _ := limiter.Key("t", "c", b)
	for _, bad := range []string{"1.5:0", "1:+3", "1:007", "1", "1:2:0", "1:2:3:4", "1:2:", "1:2:2678400000001", ":1", "x"} {
		m.Del(kb)
		if err := m.Set(kb, bad); err != nil {
			t.Fatal(err)
		}
		if _, err := lim.Allow(ctx, "c", a, b); !errors.Is(err, limiter.ErrCorruptCounter) {
			t.Errorf("bucket %q: %v; want ErrCorruptCounter", bad, err)
		}
		if ka, _ := limiter.Key("t", "c", a); m.Exists(ka) {
			t.Fatalf("bucket %q: the other limit was written", bad)
		}
	}
	if keys := m.Keys(); len(keys) != 3 {
		t.Errorf("keys %q; want the two buckets of m and the corrupt one", keys)
	}
}

// TestTokenBucketRealServer: on a real redis-server the state is three
// integers the next call reads back.
func TestTokenBucketRealServer(t *testing.T) {
	rdb := realServer(t)
	lim := newLim(t, goredis.New(rdb), strategy.NewTokenBucket())
	ctx := context.Background()
	l := limiter.PerHour(7)
	for i := range 8 {
		if r, err := lim.Allow(ctx, "real", l); err != nil || r.Allowed != (i < 7) {
			t.Fatalf("call %d: %+v, %v", i, r, err)
		}
	}
	key, _ := limiter.Key("t", "real", l)
	v, err := rdb.Get(ctx, key).Result()
	parts := strings.Split(v, ":")
	if err != nil || len(parts) != 3 || parts[2] != "3600000000" {
		t.Fatalf("bucket %q, %v", v, err)
	}
	for _, p := range parts {
		if n, err := strconv.ParseInt(p, 10, 64); err != nil || strconv.FormatInt(n, 10) != p {
			t.Errorf("bucket %q: %q is not a decimal integer", v, p)
		}
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= time.Hour-time.Minute || ttl > time.Hour {
		t.Errorf("PTTL %s, want about 1h (until full)", ttl)
	}
}

// TestTokenBucketCorruptOneLimit: the single-limit path refuses what the
// general one does, and writes nothing.
func TestTokenBucketCorruptOneLimit(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewTokenBucket())
	l := limiter.PerMinute(5)
	k, _ := limiter.Key("t", "c", l)
	for _, bad := range []string{"1.5:0", "1:+3", "1:007", "01:3", "1", "1:2:0", "1:2:03", "1:2:3:4", "x", "1:99999999999999999"} {
		if err := m.Set(k, bad); err != nil {
			t.Fatal(err)
		}
		if r, err := lim.Allow(context.Background(), "c", l); !errors.Is(err, limiter.ErrCorruptCounter) {
			t.Errorf("bucket %q: %+v, %v; want ErrCorruptCounter", bad, r, err)
		}
		if v, _ := m.Get(k); v != bad {
			t.Fatalf("bucket %q became %q", bad, v)
		}
	}
}

// TestPackedReplies: TokenBucket's and SlidingWindow's admitting calls
// with one limit come back as one integer, reset_ms·(m+1) + remaining (m
// the burst, or the rate), when that fits below 2^52, else as {1,
// remaining, reset_ms, 0}; the Limiter reads both. On a redis-server.
func TestPackedReplies(t *testing.T) {
	rdb := realServer(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name           string
		s              limiter.Strategy
		script         *store.Script
		l              limiter.Limit
		cost           int64
		args           []any // of the raw call, cost 1
		integer        bool
		m              int64 // the integer's radix, less one
		left           int64 // remaining after the raw call
		resetLo, reset int64 // ms
	}{
		{"token-bucket", strategy.NewTokenBucket(), strategy.TokenBucketScript(), limiter.Limit{Rate: 10, Period: time.Second, Burst: 5}, 2,
			[]any{1, 0, 10, 1_000_000, 5}, true, 5, 2, 290, 300},
		// 2^31 tokens, one a second back: after 2^30 are taken, ~34 years
		// to full, times 2^31 is far above 2^52
		{"token-bucket-large", strategy.NewTokenBucket(), strategy.TokenBucketScript(), limiter.Limit{Rate: 1, Period: time.Second, Burst: 1 << 31}, 1 << 30,
			[]any{1, 0, 1, 1_000_000, 1 << 31}, false, 0, 0, 0, 0},
		{"sliding-window", strategy.NewSlidingWindow(), strategy.SlidingWindowScript(), limiter.PerSecond(10), 2,
			[]any{1, 0, 10, 1000}, true, 10, 7, 1990, 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := newLim(t, goredis.New(rdb), tc.s)
			key, _ := limiter.Key("t", tc.name, tc.l)
			if r, err := lim.AllowN(ctx, tc.name, tc.cost, tc.l); err != nil || !r.Allowed {
				t.Fatalf("first call %+v, %v; want admitted", r, err)
			}
			v, err := rdb.EvalSha(ctx, tc.script.Hash(), []string{key}, tc.args...).Result()
			if err != nil {
				t.Fatalf("EVALSHA: %v", err)
			}
			n, isInt := v.(int64)
			if isInt != tc.integer {
				t.Fatalf("reply %#v; want an integer: %v", v, tc.integer)
			}
			if isInt {
				if left, reset := n%(tc.m+1), n/(tc.m+1); left != tc.left || reset < tc.resetLo || reset > tc.reset {
					t.Fatalf("reply %d reads remaining %d, reset %d ms; want %d and %d to %d", n, left, reset, tc.left, tc.resetLo, tc.reset)
				}
			}
			r, err := lim.Allow(ctx, tc.name, tc.l)
			if err != nil || !r.Allowed || r.ResetAfter <= 0 {
				t.Fatalf("third call %+v, %v; want admitted", r, err)
			}
			if tc.integer && r.Remaining != tc.left-1 {
				t.Fatalf("third call %+v; want %d remaining", r, tc.left-1)
			}
			if !tc.integer && (r.Remaining < tc.l.Burst-tc.cost-2 || r.Remaining > tc.l.Burst-tc.cost+10) {
				t.Fatalf("third call %+v; want about %d remaining", r, tc.l.Burst-tc.cost-2)
			}
		})
	}
}

// TestTokenBucketBurstLowered: a bucket written under a higher burst (99
// tokens of 100 left) is valid under a lower one, capped at its capacity:
// the next calls are decided, not refused as corrupt (which FailOpen
// would turn into admitting every call), and exactly the new burst is
// admitted at once.
func TestTokenBucketBurstLowered(t *testing.T) {
	_, st := newMini(t)
	ctx := context.Background()
	lim, err := limiter.New(st, strategy.NewTokenBucket(), limiter.WithPrefix("t"), limiter.WithFailMode(limiter.FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	before := limiter.Limit{Rate: 10, Period: time.Second, Burst: 100, Name: "api"}
	after := limiter.Limit{Rate: 10, Period: time.Second, Burst: 10, Name: "api"}
	if r, err := lim.Allow(ctx, "b", before); err != nil || !r.Allowed {
		t.Fatalf("first call %+v, %v; want admitted", r, err)
	}
	if r, err := lim.Peek(ctx, "b", after); err != nil || !r.Allowed || r.Remaining != 10 || r.Degraded {
		t.Fatalf("peek after lowering the burst: %+v, %v; want allowed with 10 remaining", r, err)
	}
	admitted := 0
	for range 15 {
		r, err := lim.Allow(ctx, "b", after)
		if err != nil || r.Degraded {
			t.Fatalf("call after lowering the burst: %+v, %v", r, err)
		}
		if r.Allowed {
			admitted++
		}
	}
	if admitted != 10 {
		t.Fatalf("%d of 15 calls admitted at once after the burst was lowered to 10; want 10", admitted)
	}
}

// TestTokenBucketEarlierRelease: a limit whose interval is not whole
// milliseconds, across the release before its bucket moved onto the
// millisecond clock (testdata/token_bucket_before_ms_clock.lua). That
// release's bucket, on TIME, is read with 2 ms less refill and written in
// this release's form; this release's bucket is read by that one as
// refilled in 2255: no refill until it expires, so a rolling deploy admits
// less, never more.
func TestTokenBucketEarlierRelease(t *testing.T) {
	old := earlierRelease(t, "token_bucket_before_ms_clock.lua")
	l := limiter.Limit{Rate: 3, Period: time.Second} // burst 3, a token every 333 333.3 µs
	args := []int64{3, 1_000_000, 3}
	ctx := context.Background()

	t.Run("miniredis", func(t *testing.T) {
		m, st := newMini(t)
		lim := newLim(t, st, strategy.NewTokenBucket())
		key, _ := limiter.Key("t", "old", l)
		// one token 100 ms ago, on TIME
		if err := m.Set(key, fmt.Sprintf("%d:1000000:1000000", m.Now().UnixMicro()-100_000)); err != nil {
			t.Fatal(err)
		}
		m.SetTTL(key, 667*time.Millisecond)
		// 1 000 000 + 100 000 µs · 3 − 2 ms · 3 = 1 294 000 units: a token
		// taken, 294 000 left, full in ⌈2 706 000 / 3000⌉ ms
		admitsInto(t, "the earlier release's bucket", lim, m, "old", l, 0, 902*time.Millisecond, "9000000000000902:294000:1000000", 902*time.Millisecond)
		m.Advance(900 * time.Millisecond)
		// the earlier release: 294 000 units, no refill: denied, its
		// wait ⌈(1 000 000 − 294 000) / 3 µs⌉ = 236 ms; nothing written
		nums, err := old.RunInt64s(ctx, st, []string{key}, args, nil)
		if err != nil || len(nums) != 4 || nums[0] != 0 || nums[3] != 236 {
			t.Fatalf("the earlier release's call = %v, %v; want denied, retry in 236 ms", nums, err)
		}
		if v, _ := m.Get(key); v != "9000000000000902:294000:1000000" {
			t.Errorf("the earlier release's denial wrote %q", v)
		}
		// this release: 294 000 + 900 · 3000 = 2 994 000 units
		if r, err := lim.Peek(ctx, "old", l); err != nil || r.Remaining != 2 || r.ResetAfter != 2*time.Millisecond {
			t.Fatalf("Peek = %+v, %v; want 2 left, full in 2ms", r, err)
		}
	})

	t.Run("redis-server", func(t *testing.T) {
		st := goredis.New(realServer(t))
		lim := newLim(t, st, strategy.NewTokenBucket())
		start := time.Now()
		admitted := 0
		for range 3 { // the whole burst through this release
			if r, err := lim.Allow(ctx, "mix", l); err != nil || !r.Allowed {
				t.Fatalf("Allow = %+v, %v; want admitted", r, err)
			}
			admitted++
		}
		// both releases, alternating
		admitted += alternateReleases(t, old, st, lim, "mix", l, args, 10)
		// a token every 333 ms came back meanwhile, one more at most for
		// where the first fell
		if most := 3 + int(time.Since(start)/(333*time.Millisecond)) + 1; admitted > most {
			t.Errorf("%d admitted in %s by both releases; at most %d", admitted, time.Since(start), most)
		}
	})
}

// TestTokenBucketBound: a bucket of whole milliseconds keeps its state in
// its key's expiry, and its value names the rule and a bound of what it
// lacks, read only when the key has lost its TTL. A new bucket's bound is
// what it lacks; a decision that leaves it lacking more than its bound
// writes twice that (at most full), else it only moves the expiry. A
// bucket found without its TTL is read as lacking its bound: never more
// tokens than it has.
func TestTokenBucketBound(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewTokenBucket())
	ctx := context.Background()
	l := limiter.Limit{Rate: 10, Period: time.Second, Burst: 10} // a token every 100 ms, full 1000 ms
	key, _ := limiter.Key("t", "b", l)
	for i, want := range []string{"100", "400", "400", "400", "1000", "1000"} {
		if r, err := lim.Allow(ctx, "b", l); err != nil || !r.Allowed || r.ResetAfter != time.Duration(100*(i+1))*time.Millisecond {
			t.Fatalf("call %d = %+v, %v; want admitted, full in %dms", i+1, r, err, 100*(i+1))
		}
		if v, _ := m.Get(key); v != want+"/10/1000000/10" {
			t.Errorf("after call %d: state %q, want %s/10/1000000/10", i+1, v, want)
		}
		if ttl := pttl(t, m, key); ttl != time.Duration(100*(i+1))*time.Millisecond {
			t.Errorf("after call %d: TTL %s, want %dms", i+1, ttl, 100*(i+1))
		}
	}
	// 600 ms missing, read as 1000 without the TTL: empty
	if _, err := st.Do(ctx, store.Cmd{Name: "PERSIST", Args: []any{key}}); err != nil {
		t.Fatal(err)
	}
	if r, err := lim.Allow(ctx, "b", l); err != nil || r.Allowed || r.RetryAfter != 100*time.Millisecond {
		t.Fatalf("Allow without the TTL = %+v, %v; want denied (read as lacking its bound, 1000 ms), retry after 100ms", r, err)
	}
	if ttl := pttl(t, m, key); ttl != time.Second {
		t.Errorf("TTL %s after the denial, want 1s (the bound, until full)", ttl)
	}
}

// TestTokenBucketValueAcrossReleases: a limit of whole milliseconds across
// the release before its value held a bound (testdata/
// token_bucket_before_getex.lua, which wrote what the bucket lacked at
// each call). Each release reads the other's bucket exactly while the key
// has its TTL (the state is the expiry); a bucket found without its TTL is
// read as lacking what its value says, which both releases write at least
// as large as what the bucket lacks.
func TestTokenBucketValueAcrossReleases(t *testing.T) {
	old := earlierRelease(t, "token_bucket_before_getex.lua")
	l := limiter.Limit{Rate: 10, Period: 3 * time.Second, Burst: 3} // a token every 300 ms
	ctx := context.Background()
	// earlier returns the earlier release's decision of one token:
	// admitted, the tokens left and the ms until full.
	earlier := func(t *testing.T, st store.Store, key string, args []int64) (bool, int64, int64) {
		t.Helper()
		r := earlierDecision(t, old, st, key, args)
		return r.Allowed, r.Remaining, r.ResetAfter.Milliseconds()
	}
	persist := func(t *testing.T, st store.Store, key string) {
		t.Helper()
		if _, err := st.Do(ctx, store.Cmd{Name: "PERSIST", Args: []any{key}}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("miniredis", func(t *testing.T) {
		m, st := newMini(t)
		lim := newLim(t, st, strategy.NewTokenBucket())
		key, _ := limiter.Key("t", "b", l)
		args := []int64{10, 3_000_000, 3}
		for i := range 2 {
			if ok, rem, reset := earlier(t, st, key, args); !ok || rem != int64(2-i) || reset != int64(300*(i+1)) {
				t.Fatalf("the earlier release's call %d: admitted %v, %d left, full in %d ms", i+1, ok, rem, reset)
			}
		}
		if v, _ := m.Get(key); v != "600/10/3000000/3" {
			t.Fatalf("the earlier release wrote %q, want 600/10/3000000/3", v)
		}
		// this release: 600 ms missing (the TTL), one token left; the
		// value's 600 no longer bounds the 900 it lacks after: rewritten
		admitsInto(t, "the earlier release's bucket", lim, m, "b", l, 0, 900*time.Millisecond, "900/10/3000000/3", 900*time.Millisecond)
		m.Advance(300 * time.Millisecond)
		// the earlier release reads this one's bucket by its TTL: 600 ms
		// missing, a token
		if ok, rem, reset := earlier(t, st, key, args); !ok || rem != 0 || reset != 900 {
			t.Fatalf("the earlier release after 300ms: admitted %v, %d left, full in %d ms; want admitted, 0, 900", ok, rem, reset)
		}
		if r, err := lim.Allow(ctx, "b", l); err != nil || r.Allowed || r.RetryAfter != 300*time.Millisecond {
			t.Fatalf("Allow on an empty bucket = %+v, %v; want retry after 300ms", r, err)
		}
		// without a TTL: the earlier release's value says 300 ms missing
		if err := m.Set(key, "300/10/3000000/3"); err != nil {
			t.Fatal(err)
		}
		if r, err := lim.Allow(ctx, "b", l); err != nil || !r.Allowed || r.Remaining != 1 || r.ResetAfter != 600*time.Millisecond {
			t.Fatalf("Allow on the earlier release's bucket without a TTL = %+v, %v; want admitted, 1 left, full in 600ms", r, err)
		}
		if ttl := pttl(t, m, key); ttl != 600*time.Millisecond {
			t.Errorf("TTL %s, want 600ms", ttl)
		}
		// this release's value (a bound of 900: full) without a TTL: the
		// earlier release reads it as empty
		persist(t, st, key)
		if ok, _, _ := earlier(t, st, key, args); ok {
			t.Errorf("the earlier release admitted on this release's bucket without a TTL, whose bound is full")
		}
	})

	t.Run("redis-server", func(t *testing.T) {
		st := goredis.New(realServer(t))
		lim := newLim(t, st, strategy.NewTokenBucket())
		fast := limiter.Limit{Rate: 10, Period: time.Second, Burst: 3} // a token every 100 ms
		start := time.Now()
		// both releases, alternating, on one bucket
		admitted := alternateReleases(t, old, st, lim, "mix", fast, []int64{10, 1_000_000, 3}, 15)
		elapsed := time.Since(start)
		if most := 3 + int(elapsed/(100*time.Millisecond)) + 1; admitted > most {
			t.Errorf("%d admitted in %s by both releases; at most %d", admitted, elapsed, most)
		}
		if admitted < 3 {
			t.Errorf("%d admitted by both releases; the burst of 3 at least", admitted)
		}
	})
}

// TestTokenBucketMicrosecondAcrossReleases: on a limit whose interval is
// not whole milliseconds (3/s, burst 5) the earlier release gave every key
// the exact time until full, this one keeps a longer TTL (within the time
// to fill from empty) and records it in the value. A bucket that both
// releases use in turn decides exactly as one that this release alone
// uses, call by call (admitted, tokens left, time until full, wait), over
// clock moves of 0 to 1000 ms.
func TestTokenBucketMicrosecondAcrossReleases(t *testing.T) {
	old := earlierRelease(t, "token_bucket_before_getex.lua")
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewTokenBucket())
	ctx := context.Background()
	l := limiter.Limit{Rate: 3, Period: time.Second, Burst: 5}
	args := []int64{3, 1_000_000, 5}
	mixed, _ := limiter.Key("t", "mixed", l)
	rng := rand.New(rand.NewPCG(7, 11))
	moves := []time.Duration{0, 0, 0, time.Millisecond, 50 * time.Millisecond, 333 * time.Millisecond, 334 * time.Millisecond, time.Second}
	for i := range 400 {
		m.Advance(moves[rng.IntN(len(moves))])
		want, err := lim.Allow(ctx, "alone", l)
		if err != nil {
			t.Fatal(err)
		}
		var got limiter.Result
		if i%2 == 0 {
			got = earlierDecision(t, old, st, mixed, args)
		} else if got, err = lim.Allow(ctx, "mixed", l); err != nil {
			t.Fatalf("call %d, this release: %v", i, err)
		}
		if got.Allowed != want.Allowed || got.Remaining != want.Remaining || got.ResetAfter != want.ResetAfter || (!want.Allowed && got.RetryAfter != want.RetryAfter) {
			v, _ := m.Get(mixed)
			t.Fatalf("call %d (the earlier release: %v): admitted %v, %d left, full in %s, retry %s; this release alone: %v, %d, %s, %s (the mixed bucket now %q)",
				i, i%2 == 0, got.Allowed, got.Remaining, got.ResetAfter, got.RetryAfter, want.Allowed, want.Remaining, want.ResetAfter, want.RetryAfter, v)
		}
	}
}

// admitsInto asks lim for one token of l for subject and fails unless it
// is admitted with remaining tokens left and the bucket full in reset,
// and the subject's key then holds value with a TTL of ttl.
func admitsInto(t *testing.T, what string, lim *limiter.Limiter, m *redistest.Mini, subject string, l limiter.Limit, remaining int64, reset time.Duration, value string, ttl time.Duration) {
	t.Helper()
	r, err := lim.Allow(context.Background(), subject, l)
	if err != nil || !r.Allowed || r.Remaining != remaining || r.ResetAfter != reset {
		t.Fatalf("%s: Allow = %+v, %v; want admitted, %d left, full in %s", what, r, err, remaining, reset)
	}
	key, err := limiter.Key("t", subject, l)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := m.Get(key); v != value {
		t.Errorf("%s: state %q, want %q", what, v, value)
	}
	if got := pttl(t, m, key); got != ttl {
		t.Errorf("%s: TTL %s, want %s", what, got, ttl)
	}
}

// earlierDecision runs the earlier release's token bucket script old
// on key with the common call's arguments args {rate, period µs, burst}
// and returns its decision: admitted, tokens left, the time until full
// and, for a denial, the wait.
func earlierDecision(t *testing.T, old *store.Script, st store.Store, key string, args []int64) limiter.Result {
	t.Helper()
	nums, err := old.RunInt64s(context.Background(), st, []string{key}, args, nil)
	if err != nil {
		t.Fatalf("the earlier release: %v", err)
	}
	if len(nums) == 1 { // admitted, packed: reset·(B+1) + remaining
		nums = []int64{1, nums[0] % (args[2] + 1), nums[0] / (args[2] + 1), 0}
	}
	if len(nums) != 4 {
		t.Fatalf("the earlier release replied %v", nums)
	}
	return limiter.Result{Allowed: nums[0] == 1, Remaining: nums[1], ResetAfter: time.Duration(nums[2]) * time.Millisecond, RetryAfter: time.Duration(nums[3]) * time.Millisecond}
}

// alternateReleases makes rounds pairs of calls of one token on subject's
// bucket of l: the earlier release's script old (with its arguments args,
// the common call's), then this release's, through lim. It returns the
// calls admitted.
func alternateReleases(t *testing.T, old *store.Script, st store.Store, lim *limiter.Limiter, subject string, l limiter.Limit, args []int64, rounds int) int {
	t.Helper()
	ctx := context.Background()
	key, err := limiter.Key("t", subject, l)
	if err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for range rounds {
		if earlierDecision(t, old, st, key, args).Allowed {
			admitted++
		}
		if r, err := lim.Allow(ctx, subject, l); err != nil {
			t.Fatalf("this release, after %d admitted: %v", admitted, err)
		} else if r.Allowed {
			admitted++
		}
	}
	return admitted
}
