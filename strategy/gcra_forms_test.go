package strategy_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// TestGCRAFormsAcrossARateChange: a limit whose rate changes within one
// period keeps its key, and may change how GCRA holds its state (the
// key's expiry is the TAT, rounded up to the millisecond; it holds the
// time that was left in milliseconds for an interval of whole
// milliseconds, else in microseconds, whose last three digits are the
// TAT's fraction of a millisecond). Each form reads the other as the TAT
// written, rounded up to the millisecond for a limit of whole
// milliseconds, on miniredis' virtual clock.
func TestGCRAFormsAcrossARateChange(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewGCRA())
	ctx := context.Background()
	tenPerSec := limiter.PerSecond(10)  // 100 ms: the expiry form
	threePerSec := limiter.PerSecond(3) // 333 334 µs: the fraction in the value
	key := func(subject string) string {
		k, err := limiter.Key("t", subject, tenPerSec)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}

	// 5 of 10/s used (500 ms to full), then 3/s: 833 334 µs after the
	// unit (834 ms to full, rounded up), none left.
	for i := range 5 {
		if r, err := lim.Allow(ctx, "a", tenPerSec); err != nil || !r.Allowed {
			t.Fatalf("10/s call %d: %+v, %v", i, r, err)
		}
	}
	if v, _ := m.Get(key("a")); v != "9000000000000500" || pttl(t, m, key("a")) != 500*time.Millisecond {
		t.Fatalf("after 5 of 10/s: state %q, TTL %s; want \"9000000000000500\" and 500ms", v, pttl(t, m, key("a")))
	}
	r, err := lim.Allow(ctx, "a", threePerSec)
	if err != nil || !r.Allowed || r.Remaining != 0 || r.ResetAfter != 834*time.Millisecond {
		t.Fatalf("3/s after 5 of 10/s: %+v, %v; want admitted, 0 left, full in 834ms", r, err)
	}
	if v, _ := m.Get(key("a")); v != "8000000000833334" || pttl(t, m, key("a")) != 834*time.Millisecond {
		t.Errorf("3/s state %q, TTL %s; want \"8000000000833334\" (833 334 µs left), 834ms", v, pttl(t, m, key("a")))
	}
	// 833 334 + 333 334 µs is 166 666 µs more than the burst's 1 000 002
	if r, err := lim.Allow(ctx, "a", threePerSec); err != nil || r.Allowed || r.RetryAfter != 167*time.Millisecond {
		t.Fatalf("3/s again: %+v, %v; want denied, retry after 167ms", r, err)
	}

	// 2 of 3/s used (TAT 666 668 µs ahead, TTL 667 ms), then 10/s: the
	// TAT rounded up to the millisecond, 767 ms after the unit, 2 left.
	for i := range 2 {
		if r, err := lim.Allow(ctx, "b", threePerSec); err != nil || !r.Allowed {
			t.Fatalf("3/s call %d: %+v, %v", i, r, err)
		}
	}
	r, err = lim.Allow(ctx, "b", tenPerSec)
	if err != nil || !r.Allowed || r.Remaining != 2 || r.ResetAfter != 767*time.Millisecond {
		t.Fatalf("10/s after 2 of 3/s: %+v, %v; want admitted, 2 left, full in 767ms", r, err)
	}
	if v, _ := m.Get(key("b")); v != "9000000000000767" || pttl(t, m, key("b")) != 767*time.Millisecond {
		t.Errorf("10/s state %q, TTL %s; want \"9000000000000767\" and 767ms", v, pttl(t, m, key("b")))
	}
}

// TestGCRAKeyWithoutTTL: a key of a limit of whole milliseconds that lost
// its TTL (its expiry was its state) is read as the time that was left
// when it was written, never less, and gets its TTL back at the next call,
// admitted or denied.
func TestGCRAKeyWithoutTTL(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewGCRA())
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	l := limiter.PerSecond(10)
	key, _ := limiter.Key("t", "p", l)
	persist := func() {
		if ok, err := rdb.Persist(ctx, key).Result(); err != nil || !ok {
			t.Fatalf("PERSIST: %v, %v", ok, err)
		}
	}
	for range 5 {
		if r, err := lim.Allow(ctx, "p", l); err != nil || !r.Allowed {
			t.Fatal(r, err)
		}
	}
	m.Advance(200 * time.Millisecond) // 300 ms left
	persist()
	r, err := lim.Allow(ctx, "p", l)
	if err != nil || !r.Allowed || r.Remaining != 4 || r.ResetAfter != 600*time.Millisecond {
		t.Fatalf("after PERSIST: %+v, %v; want admitted as if 500 ms were left: 4 left, full in 600ms", r, err)
	}
	if v, _ := m.Get(key); v != "9000000000000600" || pttl(t, m, key) != 600*time.Millisecond {
		t.Fatalf("state %q, TTL %s; want \"9000000000000600\" and 600ms", v, pttl(t, m, key))
	}
	for range 4 {
		if r, err := lim.Allow(ctx, "p", l); err != nil || !r.Allowed {
			t.Fatal(r, err)
		}
	}
	persist()
	r, err = lim.Allow(ctx, "p", l)
	if err != nil || r.Allowed || r.RetryAfter != 100*time.Millisecond {
		t.Fatalf("a full limit after PERSIST: %+v, %v; want denied, retry after 100ms", r, err)
	}
	if v, _ := m.Get(key); v != "9000000000001000" || pttl(t, m, key) != time.Second {
		t.Errorf("after the denial: state %q, TTL %s; want \"9000000000001000\" and 1s (the TTL given back)", v, pttl(t, m, key))
	}
}

// TestGCRALostTTLAfterFastPath: the one-limit call on a live key counts
// its value up by what it moves the TAT (INCRBY), so the value is an upper
// bound of the time that was left, never less: a key that lost its TTL
// after calls spread over time is read as at least as used as it was
// (here 100 ms more than exact), and one whose bound passed the burst as
// used up, denied, never admitted beyond the limit; both get their TTL
// back.
func TestGCRALostTTLAfterFastPath(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewGCRA())
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	l := limiter.PerSecond(10) // 100 ms per unit, a burst of 10
	for _, tc := range []struct {
		subject    string
		calls      int
		apart      time.Duration
		exactLeft  time.Duration // ms left after the calls
		valueAfter string        // after PERSIST and one more call
		allowed    bool
		reset      time.Duration
	}{
		// 300 ms counted, 200 ms left: read as 300, one more makes 400
		{"spread", 3, 50 * time.Millisecond, 200 * time.Millisecond, "9000000000000400", true, 400 * time.Millisecond},
		// 30 calls 90 ms apart: 390 ms left, 3000 counted, read as the
		// whole burst used
		{"long", 30, 90 * time.Millisecond, 390 * time.Millisecond, "9000000000001000", false, time.Second},
	} {
		key, _ := limiter.Key("t", tc.subject, l)
		for i := range tc.calls {
			if i > 0 {
				m.Advance(tc.apart)
			}
			if r, err := lim.Allow(ctx, tc.subject, l); err != nil || !r.Allowed {
				t.Fatalf("%s: call %d: %+v, %v", tc.subject, i, r, err)
			}
		}
		if got := pttl(t, m, key); got != tc.exactLeft {
			t.Fatalf("%s: TTL %s after the calls; want %s", tc.subject, got, tc.exactLeft)
		}
		if ok, err := rdb.Persist(ctx, key).Result(); err != nil || !ok {
			t.Fatalf("%s: PERSIST: %v, %v", tc.subject, ok, err)
		}
		r, err := lim.Allow(ctx, tc.subject, l)
		if err != nil || r.Allowed != tc.allowed || r.ResetAfter != tc.reset {
			t.Fatalf("%s: after PERSIST: %+v, %v; want allowed %v, full in %s", tc.subject, r, err, tc.allowed, tc.reset)
		}
		if !tc.allowed && r.RetryAfter != 100*time.Millisecond {
			t.Errorf("%s: RetryAfter %s; want 100ms", tc.subject, r.RetryAfter)
		}
		if v, _ := m.Get(key); v != tc.valueAfter || pttl(t, m, key) != tc.reset {
			t.Errorf("%s: state %q, TTL %s; want %q and %s", tc.subject, v, pttl(t, m, key), tc.valueAfter, tc.reset)
		}
	}
}

// TestGCRACorruptOneLimit: one limit of whole milliseconds, whose common
// call on a live key writes before it reads the value (INCRBY, which
// refuses what is no integer; an integer out of the form's range is taken
// back): a key holding text that is no state, or a hash, with a TTL that
// the call would admit under, is ErrCorruptCounter, and the key is as it
// was, value and TTL; on miniredis and on a redis-server. (A leading zero
// only on a redis-server: miniredis's INCRBY reads "007" as 7; the general
// path's check, TestGCRACorrupt, refuses it there.)
func TestGCRACorruptOneLimit(t *testing.T) {
	m, mst := newMini(t)
	rdb := realServer(t)
	for _, tc := range []struct {
		name string
		rdb  *redis.Client
		lim  *limiter.Limiter
	}{
		{"miniredis", redis.NewClient(&redis.Options{Addr: m.Addr()}), newLim(t, mst, strategy.NewGCRA())},
		{"redis-server", rdb, newLim(t, goredis.New(rdb), strategy.NewGCRA())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			l := limiter.PerSecond(10)
			key, _ := limiter.Key("t", "c", l)
			for _, bad := range []string{"1.5", "abc", "007", "", "12345678901234567", "-5", "hash"} {
				if bad == "007" && tc.name == "miniredis" {
					continue
				}
				tc.rdb.Del(ctx, key)
				// under a second (the limit is full in one): a TTL the
				// call would admit under
				const had = 900 * time.Millisecond
				set := time.Now()
				if bad == "hash" {
					tc.rdb.HSet(ctx, key, "count", 1)
					tc.rdb.PExpire(ctx, key, had)
				} else {
					tc.rdb.Set(ctx, key, bad, had)
				}
				r, err := tc.lim.Allow(ctx, "c", l)
				if !errors.Is(err, limiter.ErrCorruptCounter) {
					t.Errorf("%q: %+v, %v; want ErrCorruptCounter", bad, r, err)
				}
				ttl := tc.rdb.PTTL(ctx, key).Val()
				// (less by the time since the SET: a loaded machine's)
				if since := time.Since(set); ttl < had-since-time.Millisecond || ttl > had {
					t.Errorf("%q: TTL %s after the call, %s after the SET; want the %s it had, less that", bad, ttl, since, had)
				}
				if bad == "hash" {
					if v, err := tc.rdb.HGet(ctx, key, "count").Result(); err != nil || v != "1" {
						t.Errorf("the hash became %q, %v", v, err)
					}
				} else if v, err := tc.rdb.Get(ctx, key).Result(); err != nil || v != bad {
					t.Errorf("%q became %q, %v", bad, v, err)
				}
			}
		})
	}
}

// TestGCRADenialShortensALongTTL: a key of a limit in microseconds (the
// TAT in its value) found at a denial with a TTL longer than its state
// needs gets the TTL its state needs: until the limit is full again.
func TestGCRADenialShortensALongTTL(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewGCRA())
	ctx := context.Background()
	l := limiter.PerSecond(3) // 333 334 µs
	key, _ := limiter.Key("t", "long", l)
	for range 3 {
		if r, err := lim.Allow(ctx, "long", l); err != nil || !r.Allowed {
			t.Fatal(r, err)
		}
	}
	m.SetTTL(key, time.Hour)
	if r, err := lim.Allow(ctx, "long", l); err != nil || r.Allowed {
		t.Fatalf("4th of 3/s: %+v, %v; want denied", r, err)
	}
	if got := pttl(t, m, key); got != 1001*time.Millisecond {
		t.Errorf("TTL after the denial = %s, want 1.001s (1 000 002 µs to full, rounded up)", got)
	}
}

// TestGCRAKeyExpiringThisMillisecond: a limit not of whole milliseconds
// that finds its key with less than a millisecond left (PTTL 0) reads the
// limit as full again when the key holds a state of a millisecond form
// (16 digits from 8 or 9), and writes a fresh one; a key that holds
// anything else is an error and stays as it was (on miniredis, where a TTL
// keeps fractions of a millisecond).
func TestGCRAKeyExpiringThisMillisecond(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewGCRA())
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	l := limiter.PerSecond(3) // 333 334 µs
	key, _ := limiter.Key("t", "e", l)
	for _, state := range []string{"8000000000000999", "8000000000000000", "9000000000000001", "9999999999999999", "1.5", "abc", "hash"} {
		rdb.Del(ctx, key)
		if state == "hash" {
			rdb.HSet(ctx, key, "count", 1)
			rdb.PExpire(ctx, key, time.Millisecond)
		} else {
			rdb.Set(ctx, key, state, time.Millisecond)
		}
		m.Advance(500 * time.Microsecond)
		if ttl := rdb.PTTL(ctx, key).Val(); ttl != 0 {
			t.Fatalf("%q: PTTL %s before the call, want 0", state, ttl)
		}
		r, err := lim.Allow(ctx, "e", l)
		if state[0] == '8' || state[0] == '9' {
			// (a 16-digit value above 2^53 is a state too: the general
			// path reads it)
			if err != nil || !r.Allowed || r.Remaining != 2 || r.ResetAfter != 334*time.Millisecond {
				t.Errorf("%q: %+v, %v; want admitted, 2 left, full in 334ms", state, r, err)
			}
			if v, _ := rdb.Get(ctx, key).Result(); v != "8000000000333334" {
				t.Errorf("%q: state %q after the call, want \"8000000000333334\"", state, v)
			}
			continue
		}
		if !errors.Is(err, limiter.ErrCorruptCounter) {
			t.Errorf("%q: %+v, %v; want ErrCorruptCounter", state, r, err)
		}
		if state == "hash" {
			if v, err := rdb.HGet(ctx, key, "count").Result(); err != nil || v != "1" {
				t.Errorf("the hash became %q, %v", v, err)
			}
		} else if v, err := rdb.Get(ctx, key).Result(); err != nil || v != state {
			t.Errorf("%q became %q, %v", state, v, err)
		}
	}
}

// TestGCRAFarTATDenials: a limit whose burst takes more than 31 years to
// refill keeps its TAT since the Unix epoch, read on TIME's clock with up
// to 2 ms of slack. Used up, its denials keep that slack in RetryAfter (a
// call made RetryAfter later was denied again, 2 ms short) and never
// rewrite the TAT (each denial moved it by the time since the last one:
// a caller retrying every millisecond was never admitted). The denials
// are made by Allow, and by AllowMany beside another subject's ask (the
// script that decides many asks).
func TestGCRAFarTATDenials(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewGCRA())
	ctx := context.Background()
	l := limiter.Limit{Rate: 7, Period: time.Second, Burst: 20_000_000_000} // 90 years to refill
	if err := lim.CheckLimits(l); err != nil {
		t.Fatal(err)
	}
	for _, many := range []bool{false, true} {
		subject := fmt.Sprintf("far-%v", many)
		allow := func() (limiter.Result, error) {
			if !many {
				return lim.Allow(ctx, subject, l)
			}
			as := lim.AllowMany(ctx, []limiter.Ask{{Key: subject, Limits: []limiter.Limit{l}}, {Key: subject + "-other", Limits: []limiter.Limit{limiter.PerSecond(1000)}}})
			return as[0].Result, as[0].Err
		}
		if r, err := lim.AllowN(ctx, subject, l.Burst, l); err != nil || !r.Allowed || r.Remaining != 0 {
			t.Fatalf("AllowN(burst) = %+v, %v; want admitted, 0 left", r, err)
		}
		first, err := allow()
		if err != nil || first.Allowed || first.Remaining != 0 || first.RetryAfter < 142*time.Millisecond || first.RetryAfter > 145*time.Millisecond {
			t.Fatalf("AllowMany %v: the call after the burst = %+v, %v; want denied, 0 left, RetryAfter a unit's 142 857 µs and up to 2 ms", many, first, err)
		}
		for waited := time.Millisecond; waited < first.RetryAfter; waited += time.Millisecond {
			m.Advance(time.Millisecond)
			if r, err := allow(); err != nil || r.Allowed {
				t.Fatalf("AllowMany %v: %s after the denial (RetryAfter %s): %+v, %v; want denied", many, waited, first.RetryAfter, r, err)
			} else if left := first.RetryAfter - waited; r.RetryAfter < left || r.RetryAfter > left+time.Millisecond {
				t.Fatalf("AllowMany %v: %s after the denial (RetryAfter %s): %+v; want RetryAfter %s (to the same instant)", many, waited, first.RetryAfter, r, left)
			}
		}
		m.Advance(time.Millisecond)
		if r, err := allow(); err != nil || !r.Allowed {
			t.Errorf("AllowMany %v: at the first denial's RetryAfter %s, after a denial every millisecond: %+v, %v; want admitted", many, first.RetryAfter, r, err)
		}
	}
}

// TestGCRAFarTATRepairStaysWithinRefill: a far-TAT state (more than 31
// years ahead: a TAT on TIME's clock, read with its slack) that lost its
// TTL is repaired by the next denial: the key gets a TTL back, at most the
// limit's refill time (property 12), and its TAT is not moved past the
// burst by the slack.
func TestGCRAFarTATRepairStaysWithinRefill(t *testing.T) {
	ctx := context.Background()
	l := limiter.Limit{Rate: 7, Period: limiter.MaxPeriod, Burst: 7669}
	interval := (l.Period.Microseconds() + l.Rate - 1) / l.Rate
	whole := l.Burst * interval
	bound := (whole + 999) / 1000 // ms
	m, st := newMini(t)
	m.Advance(time.Date(2030, 6, 1, 0, 0, 0, 3000, time.UTC).Sub(m.Now()))
	lim := newLim(t, st, strategy.NewGCRA())
	if r, err := lim.AllowN(ctx, "far", l.Burst, l); err != nil || !r.Allowed {
		t.Fatalf("the burst at once: %+v, %v; want admitted", r, err)
	}
	rs, err := st.Do(ctx, store.Cmd{Name: "KEYS", Args: []any{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := rs[0].Val.([]any)
	if len(keys) != 1 {
		t.Fatalf("keys: %v", rs[0].Val)
	}
	key := keys[0].(string)
	pttl := func() int64 {
		rs, err := st.Do(ctx, store.Cmd{Name: "PTTL", Args: []any{key}})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := store.Int64(rs[0].Val)
		return n
	}
	t.Logf("after the burst: PTTL %d ms, refill %d ms", pttl(), bound)
	if _, err := st.Do(ctx, store.Cmd{Name: "PERSIST", Args: []any{key}}); err != nil {
		t.Fatal(err)
	}
	r, err := lim.Allow(ctx, "far", l)
	if err != nil || r.Allowed {
		t.Fatalf("a call after the burst: %+v, %v; want denied", r, err)
	}
	if d := pttl(); d < 0 || d > bound {
		t.Errorf("after the denial that repaired the key (it had lost its TTL): PTTL %d ms; want within the refill time, %d ms", d, bound)
	}
}
