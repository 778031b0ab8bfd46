package strategy_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

func newConc(t *testing.T, st store.Store, opts ...limiter.Option) *limiter.Concurrency {
	t.Helper()
	c, err := limiter.NewConcurrency(st, strategy.NewConcurrency(), append([]limiter.Option{limiter.WithPrefix("t")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestConcurrencyLeases walks two slots on miniredis' virtual clock: a full
// set refuses with the wait until its oldest lease expires, a release frees
// a slot at once, a lease nobody releases frees its slot at its TTL, and the
// set's key lives as long as its latest lease.
func TestConcurrencyLeases(t *testing.T) {
	m, st := newMini(t)
	c := newConc(t, st)
	ctx := context.Background()
	f := limiter.InFlight{Max: 2, TTL: 10 * time.Second}
	key, _ := limiter.InFlightKey("t", "u", f)
	acquire := func(name string, held bool, inFlight int64, retry time.Duration) limiter.Lease {
		t.Helper()
		l, err := c.Acquire(ctx, "u", f)
		if err != nil || l.Held != held || l.InFlight != inFlight || l.RetryAfter != retry || l.Degraded {
			t.Fatalf("%s: Acquire = %+v, %v; want held %v, in flight %d, retry %s", name, l, err, held, inFlight, retry)
		}
		return l
	}
	a := acquire("a", true, 1, 0)
	m.Advance(4 * time.Second)
	b := acquire("b", true, 2, 0)
	if ttl := pttl(t, m, key); ttl != 10*time.Second {
		t.Errorf("TTL %s, want 10s (the latest lease's)", ttl)
	}
	acquire("full", false, 2, 6*time.Second)
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if n, _ := m.ZMembers(key); len(n) != 1 {
		t.Fatalf("set holds %q after a release, want b's lease", n)
	}
	m.Advance(5 * time.Second)
	d := acquire("after release", true, 2, 0)
	if ok, err := d.Extend(ctx); err != nil || !ok {
		t.Fatalf("Extend of a held lease = %v, %v", ok, err)
	}
	m.Advance(5 * time.Second) // b's lease (taken at 4s) ends at 14s
	if ok, err := b.Extend(ctx); err != nil || ok {
		t.Fatalf("Extend of an expired lease = %v, %v; want false", ok, err)
	}
	if n, _ := m.ZMembers(key); len(n) != 1 {
		t.Fatalf("set holds %q, want d's lease only (b's expired)", n)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatalf("Release of an expired lease: %v", err)
	}
	acquire("b expired", true, 2, 0)
	m.Advance(10 * time.Second)
	if m.Exists(key) {
		t.Errorf("set %q outlived its leases", key)
	}
}

// TestConcurrencyMaxLowered: 3 leases held (taken at 0, 1 and 2 s, for
// 10 s), and at 3 s a caller whose Max is now 1: a slot frees for it when
// all 3 have expired, so its RetryAfter is the youngest's 9 s, not the
// oldest's 7 s, and after that wait it holds one.
func TestConcurrencyMaxLowered(t *testing.T) {
	m, st := newMini(t)
	c := newConc(t, st)
	ctx := context.Background()
	ttl := 10 * time.Second
	for i := range 3 {
		if l, err := c.Acquire(ctx, "u", limiter.InFlight{Max: 3, TTL: ttl}); err != nil || !l.Held {
			t.Fatalf("lease %d: %+v, %v", i+1, l, err)
		}
		m.Advance(time.Second)
	}
	low := limiter.InFlight{Max: 1, TTL: ttl}
	l, err := c.Acquire(ctx, "u", low)
	if err != nil || l.Held || l.InFlight != 3 || l.RetryAfter != 9*time.Second {
		t.Fatalf("Acquire under Max 1 with 3 held = %+v, %v; want refused, 3 in flight, RetryAfter 9s (the youngest's end)", l, err)
	}
	m.Advance(l.RetryAfter - time.Millisecond)
	if l, err := c.Acquire(ctx, "u", low); err != nil || l.Held || l.RetryAfter != time.Millisecond {
		t.Fatalf("a millisecond before = %+v, %v; want refused, RetryAfter 1ms", l, err)
	}
	m.Advance(time.Millisecond)
	if l, err := c.Acquire(ctx, "u", low); err != nil || !l.Held || l.InFlight != 1 {
		t.Fatalf("after RetryAfter = %+v, %v; want held, alone", l, err)
	}
}

// TestConcurrencyInvalid: bad input is a sentinel error in every fail mode
// and writes nothing.
func TestConcurrencyInvalid(t *testing.T) {
	m, st := newMini(t)
	ctx := context.Background()
	if _, err := limiter.NewConcurrency(st, nil); !errors.Is(err, limiter.ErrNilLeaser) {
		t.Errorf("nil leaser: %v", err)
	}
	if _, err := limiter.NewConcurrency(nil, strategy.NewConcurrency()); !errors.Is(err, limiter.ErrNilStore) {
		t.Errorf("nil store: %v", err)
	}
	ok := limiter.InFlight{Max: 2, TTL: time.Second}
	for _, mode := range []limiter.FailMode{limiter.FailError, limiter.FailOpen, limiter.FailClosed} {
		c := newConc(t, st, limiter.WithFailMode(mode))
		for _, tc := range []struct {
			subject string
			f       limiter.InFlight
			want    error
		}{
			{"", ok, limiter.ErrInvalidKey},
			{"u", limiter.InFlight{Max: 0, TTL: time.Second}, limiter.ErrInvalidLimit},
			{"u", limiter.InFlight{Max: -1, TTL: time.Second}, limiter.ErrInvalidLimit},
			{"u", limiter.InFlight{Max: limiter.MaxInFlight + 1, TTL: time.Second}, limiter.ErrInvalidLimit},
			{"u", limiter.InFlight{Max: 1}, limiter.ErrInvalidLimit},
			{"u", limiter.InFlight{Max: 1, TTL: 1500 * time.Microsecond}, limiter.ErrInvalidLimit},
			{"u", limiter.InFlight{Max: 1, TTL: limiter.MaxPeriod + time.Millisecond}, limiter.ErrInvalidLimit},
		} {
			if l, err := c.Acquire(ctx, tc.subject, tc.f); !errors.Is(err, tc.want) || l.Held {
				t.Errorf("mode %s: Acquire(%q, %+v) = %+v, %v; want %v", mode, tc.subject, tc.f, l, err, tc.want)
			}
		}
	}
	if keys := m.Keys(); len(keys) != 0 {
		t.Errorf("refused calls wrote %q", keys)
	}
}

// TestConcurrencyFailModes: with Redis gone, FailError returns the error,
// FailOpen grants a degraded lease that holds nothing, FailClosed refuses.
func TestConcurrencyFailModes(t *testing.T) {
	m, st := newMini(t)
	m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f := limiter.InFlight{Max: 1, TTL: time.Second}
	if l, err := newConc(t, st).Acquire(ctx, "u", f); err == nil || l.Held {
		t.Errorf("FailError: %+v, %v; want an error", l, err)
	}
	l, err := newConc(t, st, limiter.WithFailMode(limiter.FailOpen)).Acquire(ctx, "u", f)
	if err != nil || !l.Held || !l.Degraded || l.Cause == nil || l.ID() != "" {
		t.Errorf("FailOpen: %+v, %v; want a degraded lease", l, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release of a degraded lease: %v", err)
	}
	if l, err := newConc(t, st, limiter.WithFailMode(limiter.FailClosed)).Acquire(ctx, "u", f); err != nil || l.Held || !l.Degraded || l.Cause == nil {
		t.Errorf("FailClosed: %+v, %v; want a degraded refusal", l, err)
	}
}

// TestConcurrencyCorrupt: a lease set's key of another type is
// ErrCorruptCounter and stays as it was.
func TestConcurrencyCorrupt(t *testing.T) {
	m, st := newMini(t)
	c := newConc(t, st)
	f := limiter.InFlight{Max: 1, TTL: time.Second}
	key, _ := limiter.InFlightKey("t", "u", f)
	if err := m.Set(key, "x"); err != nil {
		t.Fatal(err)
	}
	if l, err := c.Acquire(context.Background(), "u", f); !errors.Is(err, limiter.ErrCorruptCounter) || l.Held {
		t.Fatalf("Acquire on a string = %+v, %v; want ErrCorruptCounter", l, err)
	}
	if v, _ := m.Get(key); v != "x" {
		t.Errorf("the key became %q", v)
	}
	// Release reads ZREM's own reply: a key that is not a sorted set is
	// ErrCorruptCounter, not a release that worked.
	l, err := c.Acquire(context.Background(), "w", f)
	if err != nil || !l.Held {
		t.Fatalf("Acquire = %+v, %v", l, err)
	}
	wkey, _ := limiter.InFlightKey("t", "w", f)
	m.Del(wkey)
	if err := m.Set(wkey, "x"); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(context.Background()); !errors.Is(err, limiter.ErrCorruptCounter) {
		t.Errorf("Release on a string = %v; want ErrCorruptCounter", err)
	}
}

// TestConcurrencyReleaseRefused: a server that refuses the ZREM (here an
// ACL without it; also READONLY after a failover) fails the Release, and
// the slot is still held, as the error says.
func TestConcurrencyReleaseRefused(t *testing.T) {
	srv := redistest.StartServer(t)
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = admin.Close() })
	if err := admin.Do(ctx, "ACL", "SETUSER", "nozrem", "on", ">pw", "~*", "+@all", "-zrem").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "nozrem", Password: "pw", MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	c := newConc(t, goredis.New(rdb))
	f := limiter.InFlight{Max: 1, TTL: time.Minute}
	l, err := c.Acquire(ctx, "u", f)
	if err != nil || !l.Held {
		t.Fatalf("Acquire = %+v, %v", l, err)
	}
	if err := l.Release(ctx); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("Release refused by the server = %v; want its NOPERM error", err)
	}
	if next, err := c.Acquire(ctx, "u", f); err != nil || next.Held {
		t.Errorf("Acquire after the refused Release = %+v, %v; want refused (the slot is still held)", next, err)
	}
}

// TestConcurrencyRealServer: 40 callers race for 5 slots on a real
// redis-server; exactly 5 hold one, and releasing them frees the set.
func TestConcurrencyRealServer(t *testing.T) {
	rdb := realServer(t)
	st := goredis.New(rdb)
	c := newConc(t, st)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := limiter.InFlight{Max: 5, TTL: time.Minute}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		held   []limiter.Lease
		failed atomic.Int64
	)
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Acquire(ctx, "u", f)
			if err != nil {
				failed.Add(1)
				t.Errorf("Acquire: %v", err)
				return
			}
			if l.Held {
				mu.Lock()
				held = append(held, l)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(held) != 5 {
		t.Fatalf("%d leases held of 5 slots (%d calls failed)", len(held), failed.Load())
	}
	key, _ := limiter.InFlightKey("t", "u", f)
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 59*time.Second || ttl > time.Minute {
		t.Errorf("PTTL %s, want about 1m", ttl)
	}
	for _, l := range held {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := rdb.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Errorf("the set exists after every release: %d, %v", n, err)
	}
}

// TestConcurrencyLostReplyFreesSlot: an Acquire whose reply is lost may
// have taken a slot under an ID no caller holds; Acquire releases it, so a
// retry of a subject with one slot is granted, not refused for a TTL.
func TestConcurrencyLostReplyFreesSlot(t *testing.T) {
	srv := redistest.StartServer(t)
	p := redistest.NewProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	c := newConc(t, goredis.New(rdb))
	ctx := context.Background()
	f := limiter.InFlight{Max: 1, TTL: time.Minute}
	// the script loaded first, so that the reply dropped is the EVALSHA's
	warm, err := c.Acquire(ctx, "warm", f)
	if err != nil || !warm.Held {
		t.Fatalf("Acquire = %+v, %v", warm, err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	p.DropReply("EVALSHA")
	if l, err := c.Acquire(ctx, "u", f); err == nil || l.Held {
		t.Fatalf("Acquire with its reply lost = %+v, %v; want an error", l, err)
	}
	retry, err := c.Acquire(ctx, "u", f)
	if err != nil || !retry.Held || retry.InFlight != 1 {
		t.Fatalf("retried Acquire = %+v, %v; want held, 1 in flight (the lost attempt's slot freed)", retry, err)
	}
}
