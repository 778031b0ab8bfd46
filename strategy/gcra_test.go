package strategy_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// TestGCRAExact walks a limit of 10/s (burst 10) on miniredis' virtual
// clock: the burst, then one unit every 100 ms, with the exact RetryAfter,
// ResetAfter and Remaining, and the key living until the limit is full
// again (its expiry is the state: an interval of whole milliseconds).
func TestGCRAExact(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewGCRA())
	ctx := context.Background()
	l := limiter.PerSecond(10)
	for i := range 10 {
		r, err := lim.Allow(ctx, "g", l)
		if err != nil || !r.Allowed || r.Remaining != int64(9-i) || r.ResetAfter != time.Duration(i+1)*100*time.Millisecond {
			t.Fatalf("call %d: %+v, %v; want admitted, %d remaining, reset in %dms", i, r, err, 9-i, (i+1)*100)
		}
	}
	key, _ := limiter.Key("t", "g", l)
	if got := pttl(t, m, key); got != time.Second {
		t.Errorf("TTL after the burst = %s, want 1s (until the limit is full again)", got)
	}
	if v, _ := m.Get(key); v != "9000000000001000" {
		t.Errorf("state = %q, want 9·10^15 + the milliseconds until full as written, 1000", v)
	}
	r, err := lim.Allow(ctx, "g", l)
	if err != nil || r.Allowed || r.RetryAfter != 100*time.Millisecond || r.Remaining != 0 {
		t.Fatalf("11th call: %+v, %v; want denied, retry after 100ms", r, err)
	}
	m.Advance(99 * time.Millisecond)
	if r, err := lim.Allow(ctx, "g", l); err != nil || r.Allowed || r.RetryAfter != time.Millisecond {
		t.Fatalf("after 99ms: %+v, %v; want denied, retry after 1ms", r, err)
	}
	m.Advance(time.Millisecond)
	if r, err := lim.Allow(ctx, "g", l); err != nil || !r.Allowed || r.Remaining != 0 {
		t.Fatalf("after 100ms: %+v, %v; want admitted with 0 remaining", r, err)
	}
	m.Advance(550 * time.Millisecond)
	if r, err := lim.Peek(ctx, "g", l); err != nil || !r.Allowed || r.Remaining != 5 || r.ResetAfter != 450*time.Millisecond {
		t.Fatalf("peek after 550ms: %+v, %v; want 5 remaining, full in 450ms", r, err)
	}
	if r, err := lim.AllowN(ctx, "g", 11, l); err != nil || r.Allowed || r.RetryAfter != -1 {
		t.Fatalf("cost 11 with burst 10: %+v, %v; want never (RetryAfter -1)", r, err)
	}
	if r, err := lim.AllowN(ctx, "g", 7, l); err != nil || r.Allowed || r.RetryAfter != 150*time.Millisecond {
		t.Fatalf("cost 7 with 5 left: %+v, %v; want retry after 150ms (5.5 left)", r, err)
	}
	m.Advance(time.Second)
	if r, err := lim.AllowN(ctx, "g", 10, l); err != nil || !r.Allowed {
		t.Fatalf("a full burst after the limit refilled: %+v, %v", r, err)
	}
}

// TestGCRABurst: Burst apart from Rate; several limits all or nothing.
func TestGCRABurst(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewGCRA())
	ctx := context.Background()
	l := limiter.Limit{Rate: 1, Period: time.Second, Burst: 3}
	daily := limiter.Limit{Rate: 4, Period: 24 * time.Hour, Name: "daily"}
	for i := range 3 {
		if r, err := lim.Allow(ctx, "b", l, daily); err != nil || !r.Allowed {
			t.Fatalf("call %d: %+v, %v", i, r, err)
		}
	}
	r, err := lim.Allow(ctx, "b", l, daily)
	if err != nil || r.Allowed || r.Index != 0 || r.RetryAfter != time.Second {
		t.Fatalf("4th call: %+v, %v; want denied by the 1/s limit, retry after 1s", r, err)
	}
	m.Advance(time.Second)
	if r, err := lim.Allow(ctx, "b", l, daily); err != nil || !r.Allowed || r.Remaining != 0 {
		t.Fatalf("after 1s: %+v, %v; want admitted with 0 left", r, err)
	}
	m.Advance(10 * time.Second)
	r, err = lim.Allow(ctx, "b", l, daily)
	if err != nil || r.Allowed || r.Index != 1 || r.RetryAfter != 6*time.Hour-11*time.Second {
		t.Fatalf("daily exhausted: %+v, %v; want denied by daily, retry after 6h-11s", r, err)
	}
	// The denial consumed nothing from the 1/s limit: 3 at once fit.
	if r, err := lim.AllowN(ctx, "b", 3, l); err != nil || !r.Allowed {
		t.Fatalf("the 1/s limit after a denial by daily: %+v, %v; want a full burst", r, err)
	}
}

// TestGCRAFarDates: the state stays exact at any date to 2100 and for
// emission intervals from 1 µs to 31 days.
func TestGCRAFarDates(t *testing.T) {
	ctx := context.Background()
	for _, at := range []time.Time{time.Date(2099, 12, 31, 23, 59, 59, 999999000, time.UTC), time.Date(2030, 1, 1, 0, 0, 0, 1000, time.UTC)} {
		for _, l := range []limiter.Limit{
			limiter.Per(1000, time.Millisecond),          // 1 µs
			limiter.Per(3, time.Second),                  // 333 333.3… µs, rounded up
			limiter.Per(1, limiter.MaxPeriod),            // 31 days
			{Rate: 1, Period: time.Hour, Burst: 1 << 20}, // 120 years... refused below
		} {
			m, st := newMini(t)
			m.Advance(at.Sub(m.Now()))
			lim := newLim(t, st, strategy.NewGCRA())
			r, err := lim.Allow(ctx, "d", l)
			if l.Burst != 0 {
				if !errors.Is(err, limiter.ErrInvalidLimit) || len(m.Keys()) != 0 {
					t.Fatalf("%s: %+v, %v; want ErrInvalidLimit and nothing written", l, r, err)
				}
				continue
			}
			if err != nil || !r.Allowed {
				t.Fatalf("%s at %s: %+v, %v", l, at, r, err)
			}
			interval := (l.Period.Microseconds() + l.Rate - 1) / l.Rate
			key, _ := limiter.Key("t", "d", l)
			v, _ := m.Get(key)
			// the time until the TAT: for whole milliseconds 9·10^15 + it
			// in milliseconds, for any other 8·10^15 + it in microseconds
			// (whatever the date: the TAT itself is the key's expiry)
			state := strconv.FormatInt(8e15+interval, 10)
			if interval%1000 == 0 {
				state = strconv.FormatInt(9e15+interval/1000, 10)
			}
			if v != state {
				t.Errorf("%s at %s: state %q, want %q", l, at, v, state)
			}
			if _, err := lim.AllowN(ctx, "d", l.Rate-1, l); err != nil {
				t.Fatal(err)
			}
			r, err = lim.Allow(ctx, "d", l)
			want := time.Duration(interval) * time.Microsecond
			want = (want + time.Millisecond - 1).Truncate(time.Millisecond)
			if err != nil || r.Allowed || r.RetryAfter != want {
				t.Errorf("%s at %s: call past the burst: %+v, %v; want denied, retry after %s", l, at, r, err, want)
			}
		}
	}
}

// TestGCRAInvalid: limits GCRA cannot hold exactly are refused before any
// I/O, in every fail mode.
func TestGCRAInvalid(t *testing.T) {
	m, st := newMini(t)
	ctx := context.Background()
	for _, mode := range []limiter.FailMode{limiter.FailError, limiter.FailOpen, limiter.FailClosed} {
		lim, err := limiter.New(st, strategy.NewGCRA(), limiter.WithFailMode(mode))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []limiter.Limit{
			limiter.Per(1001, time.Millisecond),
			{Rate: 1, Period: limiter.MaxPeriod, Burst: 1200},
		} {
			if r, err := lim.Allow(ctx, "x", l); !errors.Is(err, limiter.ErrInvalidLimit) {
				t.Errorf("fail mode %s, %s burst %d: %+v, %v; want ErrInvalidLimit", mode, l, l.Burst, r, err)
			}
		}
	}
	if keys := m.Keys(); len(keys) != 0 {
		t.Errorf("refused calls wrote %q", keys)
	}
}

// TestGCRACorrupt: a key that holds no GCRA state is ErrCorruptCounter and
// nothing is written to any limit.
func TestGCRACorrupt(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewGCRA())
	ctx := context.Background()
	a, b := limiter.PerSecond(5), limiter.PerMinute(50)
	ka, _ := limiter.Key("t", "c", a)
	kb, _ := limiter.Key("t", "c", b)
	for _, bad := range []string{"1.5", "-3", "+3", "007", "abc", "", "12345678901234567"} {
		if err := m.Set(kb, bad); err != nil {
			t.Fatal(err)
		}
		if r, err := lim.Allow(ctx, "c", a, b); !errors.Is(err, limiter.ErrCorruptCounter) {
			t.Errorf("state %q: %+v, %v; want ErrCorruptCounter", bad, r, err)
		}
		if m.Exists(ka) {
			t.Fatalf("state %q: the other limit's key was written", bad)
		}
		if v, _ := m.Get(kb); v != bad {
			t.Fatalf("state %q became %q", bad, v)
		}
	}
}

// TestGCRARealServer: on a real redis-server, a limit keeps its TAT as the
// key's expiry (rounded up to the millisecond), the key holding the time
// that was left (in milliseconds for an interval of whole milliseconds,
// else in microseconds, whose last three digits are the TAT's fraction of
// a millisecond); the next call reads either back.
func TestGCRARealServer(t *testing.T) {
	rdb := realServer(t)
	lim := newLim(t, goredis.New(rdb), strategy.NewGCRA())
	ctx := context.Background()
	for _, l := range []limiter.Limit{
		limiter.Per(3, time.Hour), // interval 1 200 000 ms
		limiter.Per(7, time.Hour), // interval 514 285 715 µs (rounded up)
	} {
		interval := (l.Period.Microseconds() + l.Rate - 1) / l.Rate
		before, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		for i := range l.Rate + 1 {
			r, err := lim.Allow(ctx, l.String(), l)
			if err != nil || r.Allowed != (i < l.Rate) {
				t.Fatalf("%s: call %d: %+v, %v", l, i, r, err)
			}
		}
		after, _ := rdb.Time(ctx).Result()
		key, _ := limiter.Key("t", l.String(), l)
		v, err := rdb.Get(ctx, key).Result()
		state, perr := strconv.ParseInt(v, 10, 64)
		// 8·10^15 + the µs, or 9·10^15 + the ms, that were left at the
		// last write (each call adds what it moves the TAT by)
		lo, hi := 8e15+l.Rate*interval-after.Sub(before).Microseconds()-1000, int64(8e15+l.Rate*interval)
		if interval%1000 == 0 {
			lo, hi = 9e15+l.Rate*interval/1000-after.Sub(before).Milliseconds()-1, 9e15+l.Rate*interval/1000
		}
		if err != nil || perr != nil || strconv.FormatInt(state, 10) != v || state < lo || state > hi {
			t.Fatalf("%s: state %q (%v, %v), want an integer in [%d, %d]", l, v, err, perr, lo, hi)
		}
		// (7 intervals of 514 285 715 µs: 1h and 5 µs, rounded up)
		if ttl := rdb.PTTL(ctx, key).Val(); ttl <= time.Hour-time.Minute || ttl > time.Hour+time.Millisecond {
			t.Errorf("%s: PTTL %s, want about 1h (until full again, rounded up to the millisecond)", l, ttl)
		}
	}
}

// TestGCRAIntegerReply: an admitting call with one limit comes back as one
// integer, reset_ms·(burst+1) + remaining, when that fits below 2^52, and
// as {1, remaining, reset_ms, 0} otherwise; both read the same, on a
// redis-server.
func TestGCRAIntegerReply(t *testing.T) {
	rdb := realServer(t)
	ctx := context.Background()
	lim := newLim(t, goredis.New(rdb), strategy.NewGCRA())
	for _, tc := range []struct {
		name    string
		l       limiter.Limit
		cost    int64 // of the first call
		integer bool  // the second call's reply is one integer
	}{
		{"small", limiter.Limit{Rate: 10, Period: time.Second, Burst: 5}, 2, true},
		// about 2^33 units of 1 µs: after half of them, about 2^22 ms to
		// full, times 2^33 is above 2^52
		{"large", limiter.Limit{Rate: 8_589_934_000, Period: 8_589_934 * time.Millisecond}, 4_294_967_000, false},
	} {
		key, err := limiter.Key("t", "int-"+tc.name, tc.l)
		if err != nil {
			t.Fatal(err)
		}
		burst := tc.l.Burst
		if burst == 0 {
			burst = tc.l.Rate
		}
		interval := tc.l.Period.Microseconds() / tc.l.Rate
		start := time.Now()
		if r, err := lim.AllowN(ctx, "int-"+tc.name, tc.cost, tc.l); err != nil || !r.Allowed || r.Remaining != burst-tc.cost {
			t.Fatalf("%s: first call %+v, %v; want admitted, %d remaining", tc.name, r, err, burst-tc.cost)
		}
		v, err := rdb.EvalSha(ctx, strategy.GCRAScript().Hash(), []string{key}, 1, 0, interval, burst).Result()
		if err != nil {
			t.Fatalf("%s: EVALSHA: %v", tc.name, err)
		}
		if _, isInt := v.(int64); isInt != tc.integer {
			t.Fatalf("%s: reply %#v; want an integer: %v", tc.name, v, tc.integer)
		}
		if tc.integer {
			n := v.(int64)
			// 3 units used of 5, 100 ms each: 2 left, full in 300 ms less
			// the time since (a busy machine may take tens of ms), and
			// the units left are those the reset does not cover
			took := time.Since(start).Milliseconds()
			if remaining, reset := n%(burst+1), n/(burst+1); reset > 300 || reset < 300-took-1 || remaining != burst-(reset+99)/100 {
				t.Fatalf("%s: reply %d reads remaining %d, reset %d ms; want a reset in [%d, 300] and the units it does not cover", tc.name, n, remaining, reset, 300-took-1)
			}
		}
		// The third call, read through the Limiter: the small limit gets
		// nothing back in the few ms since (a unit takes 100 ms); the
		// large one a unit per µs.
		r, err := lim.Allow(ctx, "int-"+tc.name, tc.l)
		low, high := burst-tc.cost-2, burst-tc.cost-2
		if !tc.integer {
			high += 10_000_000 // 10 s of refill
		}
		if err != nil || !r.Allowed || r.Remaining < low || r.Remaining > high || r.ResetAfter <= 0 {
			t.Fatalf("%s: third call %+v, %v; want admitted, %d to %d remaining", tc.name, r, err, low, high)
		}
	}
}

// TestGCRAFarDateRetryAfter: near 2100 a denied call's TAT plus its cost
// passes 2^53 µs, where Lua's numbers drop the last digit; RetryAfter is
// computed from the distances to now, which stay exact. A burst of 7669
// at 7 per 31 days (2 934 378 514 289 001 µs to refill, ≡ 1 mod 1000), at
// two instants whose sums round down and up. The state, more than 31
// years ahead, is a TAT on TIME's clock, read with up to 1999 µs more
// (the clock keys expire by may lag TIME's): the RetryAfter keeps them,
// so that a call made RetryAfter later fits.
func TestGCRAFarDateRetryAfter(t *testing.T) {
	ctx := context.Background()
	l := limiter.Limit{Rate: 7, Period: limiter.MaxPeriod, Burst: 7669}
	interval := (l.Period.Microseconds() + l.Rate - 1) / l.Rate
	whole := l.Burst * interval
	want := time.Duration((whole+1999+999)/1000) * time.Millisecond
	for _, at := range []time.Time{
		time.Date(2099, 6, 1, 0, 0, 0, 3000, time.UTC),
		time.Date(2099, 6, 1, 0, 0, 0, 1000, time.UTC),
	} {
		m, st := newMini(t)
		m.Advance(at.Sub(m.Now()))
		lim := newLim(t, st, strategy.NewGCRA())
		if r, err := lim.AllowN(ctx, "far", l.Burst, l); err != nil || !r.Allowed {
			t.Fatalf("at %s, the burst at once: %+v, %v; want admitted", at, r, err)
		}
		if r, err := lim.AllowN(ctx, "far", l.Burst, l); err != nil || r.Allowed || r.RetryAfter != want {
			t.Errorf("at %s, the second burst: %+v, %v; want denied with RetryAfter %d ms", at, r, err, want.Milliseconds())
		}
	}
}
