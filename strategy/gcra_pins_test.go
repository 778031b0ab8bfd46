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

// A key stripped of its TTL whose state is further ahead than the
// whole burst is read "up to the whole burst", also by a Peek.
func TestGCRAPeekWithoutTTLReadsAtMostTheBurst(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewGCRA())
	ctx := context.Background()
	l := limiter.PerSecond(10) // 100 ms, burst 10
	key, _ := limiter.Key("t", "p", l)
	if err := m.Set(key, "9000000000005000"); err != nil { // 5 s left when written, no TTL
		t.Fatal(err)
	}
	r, err := lim.Peek(ctx, "p", l)
	if err != nil || r.Allowed || r.RetryAfter != 100*time.Millisecond || r.ResetAfter != time.Second {
		t.Fatalf("Peek: %+v, %v; want denied, RetryAfter 100ms, ResetAfter 1s (read up to the whole burst)", r, err)
	}
}

// A key expiring within this millisecond (PTTL 0) that holds no state
// is ErrCorruptCounter and is left as it was (one-limit call, ms form).
func TestGCRACorruptKeyInItsLastMillisecond(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewGCRA())
	ctx := context.Background()
	l := limiter.PerSecond(10)
	key, _ := limiter.Key("t", "z", l)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	rdb.HSet(ctx, key, "count", 1)
	rdb.PExpire(ctx, key, time.Millisecond)
	m.Advance(500 * time.Microsecond)
	if d := rdb.PTTL(ctx, key).Val(); d != 0 {
		t.Fatalf("PTTL %s; want 0", d)
	}
	r, err := lim.Allow(ctx, "z", l)
	if !errors.Is(err, limiter.ErrCorruptCounter) {
		t.Errorf("%+v, %v; want ErrCorruptCounter", r, err)
	}
	if typ := rdb.Type(ctx, key).Val(); typ != "hash" {
		t.Errorf("key became a %q", typ)
	}
}

// A burst that takes exactly MaxRefill to refill is valid.
func TestGCRABurstRefillingInExactlyMaxRefill(t *testing.T) {
	g := strategy.NewGCRA()
	l := limiter.Limit{Rate: 1000, Period: 3 * time.Millisecond, Burst: strategy.MaxRefill.Microseconds() / 3}
	if err := g.CheckLimit(l); err != nil {
		t.Errorf("%v burst %d (exactly MaxRefill): %v; want valid", l, l.Burst, err)
	}
	l.Burst++
	if err := g.CheckLimit(l); !errors.Is(err, limiter.ErrInvalidLimit) {
		t.Errorf("burst %d: %v; want ErrInvalidLimit", l.Burst, err)
	}
}

// A key in the epoch form (a TAT more than 31 years ahead) found at a
// denial with a TTL longer than the whole burst's refill gets one no longer
// than that ("expiring when the limit is full again (never later than the
// time to refill the whole burst)").
func TestGCRAEpochFormDenialShortensTTL(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewGCRA())
	ctx := context.Background()
	l := limiter.Limit{Rate: 7, Period: 31 * 24 * time.Hour, Burst: 5800} // 70 years to refill
	key, _ := limiter.Key("t", "e", l)
	r0, err := lim.AllowN(ctx, "e", 5800, l)
	if err != nil || !r0.Allowed {
		t.Fatal(r0, err)
	}
	m.SetTTL(key, r0.ResetAfter+time.Hour)
	r, err := lim.Allow(ctx, "e", l)
	if err != nil || r.Allowed {
		t.Fatalf("%+v, %v; want denied", r, err)
	}
	if got := pttl(t, m, key); got > r0.ResetAfter+2*time.Millisecond {
		t.Errorf("TTL %s after the denial; want at most %s (+2 ms slack)", got, r0.ResetAfter)
	}
}

// A key of the microsecond form stripped of its TTL is read "no less
// used than when it was last written": 1 001 µs to full is reported as
// ResetAfter 2 ms (rounded up), not 1 ms.
func TestGCRAMicroFormWithoutTTLReadExactly(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewGCRA())
	ctx := context.Background()
	l := limiter.Limit{Rate: 1000, Period: 1001 * time.Millisecond} // 1 001 µs
	key, _ := limiter.Key("t", "n", l)
	if r, err := lim.Allow(ctx, "n", l); err != nil || !r.Allowed || r.ResetAfter != 2*time.Millisecond {
		t.Fatalf("%+v, %v; want admitted, full in 2ms", r, err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	if !rdb.Persist(ctx, key).Val() {
		t.Fatal("PERSIST failed")
	}
	r, err := lim.Peek(ctx, "n", l)
	if err != nil || !r.Allowed || r.ResetAfter != 2*time.Millisecond || r.Remaining != 999 {
		t.Errorf("Peek after PERSIST: %+v, %v; want ResetAfter 2ms, Remaining 999", r, err)
	}
}

// A key of a microsecond-interval limit holding no state (16 digits
// with a leading zero) found with PTTL 0 is ErrCorruptCounter and is left
// as it was ("a key that holds anything else is limiter.ErrCorruptCounter,
// and the call leaves every key as it found it").
func TestGCRAMicroFormCorruptKeyInItsLastMillisecond(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, st, strategy.NewGCRA())
	ctx := context.Background()
	l := limiter.PerSecond(3) // 333 334 µs
	key, _ := limiter.Key("t", "c0", l)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	rdb.Set(ctx, key, "0000000000000123", time.Millisecond)
	m.Advance(500 * time.Microsecond)
	if d := rdb.PTTL(ctx, key).Val(); d != 0 {
		t.Fatalf("PTTL %s; want 0", d)
	}
	r, err := lim.Allow(ctx, "c0", l)
	if !errors.Is(err, limiter.ErrCorruptCounter) {
		t.Errorf("%+v, %v; want ErrCorruptCounter", r, err)
	}
	if v := rdb.Get(ctx, key).Val(); v != "0000000000000123" {
		t.Errorf("key became %q", v)
	}
}
