package limiter_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// TestQuotaLeaseOptions: a lease size below 2, or a strategy that does not
// count in fixed windows, is ErrInvalidOption.
func TestQuotaLeaseOptions(t *testing.T) {
	_, st := newMiniFastFail(t)
	for _, c := range []struct {
		s     limiter.Strategy
		units int64
		ok    bool
	}{
		{strategy.NewFixedWindow(), 10, true},
		{strategy.NewBucketed(), 10, true},
		{strategy.NewOptimistic(), 10, true},
		{strategy.NewFixedWindow(), 1, false},
		{strategy.NewFixedWindow(), 0, false},
		{strategy.NewGCRA(), 10, false},
		{strategy.NewTokenBucket(), 10, false},
		{strategy.NewSlidingWindow(), 10, false},
		{strategy.NewSlidingLog(), 10, false},
		{strategy.NewAlignedWindow(), 10, true},
	} {
		_, err := limiter.New(st, c.s, limiter.WithQuotaLease(c.units))
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, limiter.ErrInvalidOption)) {
			t.Errorf("%T with a lease of %d: %v", c.s, c.units, err)
		}
	}
}

// TestQuotaLease: a hot subject takes a lease of 10 units in one round
// trip and is admitted 9 more times without one; the counter in Redis holds
// the whole lease; when fewer than a lease remain, calls go to Redis one by
// one and are exact; other costs, several limits and Peek go to Redis;
// Reset forgets the lease.
func TestQuotaLease(t *testing.T) {
	m, st := newMiniFastFail(t)
	ec := &evalCounter{Store: st}
	lim, err := limiter.New(ec, strategy.NewFixedWindow(), limiter.WithQuotaLease(10))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l := limiter.PerMinute(25)
	key, _ := limiter.Key(limiter.DefaultPrefix, "hot", l)
	if _, err := lim.Allow(ctx, "warm-up", limiter.PerMinute(1)); err != nil { // loads the script
		t.Fatal(err)
	}
	ec.n.Store(0)
	for i := range 10 {
		r, err := lim.Allow(ctx, "hot", l)
		if err != nil || !r.Allowed || r.Remaining != int64(24-i) || r.ResetAfter <= 0 || r.ResetAfter > time.Minute || !r.Leased {
			t.Fatalf("call %d: %+v, %v; want admitted from the lease, %d remaining", i, r, err, 24-i)
		}
	}
	if n := ec.n.Load(); n != 1 {
		t.Errorf("10 calls ran %d scripts, want 1 (the lease)", n)
	}
	if v, _ := m.Get(key); v != "10" {
		t.Errorf("counter %q, want 10 (the lease)", v)
	}
	// The second lease: 10 more.
	for i := range 10 {
		if r, err := lim.AllowN(ctx, "hot", 1, l); err != nil || !r.Allowed {
			t.Fatalf("second lease, call %d: %+v, %v", i, r, err)
		}
	}
	if v, _ := m.Get(key); v != "20" || ec.n.Load() != 2 {
		t.Errorf("counter %q after %d scripts, want 20 after 2", v, ec.n.Load())
	}
	// 5 left: no whole lease; one call per unit, exact.
	admitted := 0
	for range 8 {
		r, err := lim.Allow(ctx, "hot", l)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			admitted++
			if r.Leased {
				t.Errorf("admitted from a lease with fewer than a lease left: %+v", r)
			}
		}
	}
	if v, _ := m.Get(key); admitted != 5 || v != "25" {
		t.Errorf("with 5 left: %d admitted, counter %q; want 5 and 25", admitted, v)
	}
	// Several limits and Peek go to Redis.
	before := ec.n.Load()
	if r, err := lim.Allow(ctx, "other", l, limiter.PerHour(100)); err != nil || !r.Allowed || r.Leased {
		t.Errorf("two limits: %+v, %v", r, err)
	}
	if r, err := lim.Peek(ctx, "other", l); err != nil || r.Leased {
		t.Errorf("peek: %+v, %v", r, err)
	}
	if n := ec.n.Load() - before; n != 2 {
		t.Errorf("two limits and a peek ran %d scripts, want 2", n)
	}
	// Reset forgets the lease: the next call takes a new one.
	if _, err := lim.Allow(ctx, "reset", l); err != nil {
		t.Fatal(err)
	}
	if err := lim.Reset(ctx, "reset", l); err != nil {
		t.Fatal(err)
	}
	before = ec.n.Load()
	if r, err := lim.Allow(ctx, "reset", l); err != nil || !r.Allowed || r.Remaining != 24 {
		t.Errorf("after Reset: %+v, %v; want a new lease, 24 remaining", r, err)
	}
	if ec.n.Load() != before+1 {
		t.Error("after Reset the call did not take a new lease")
	}
	// Bad input is still refused.
	if _, err := lim.Allow(ctx, "", l); !errors.Is(err, limiter.ErrInvalidKey) {
		t.Errorf("empty key: %v", err)
	}
	if _, err := lim.Allow(ctx, "x", limiter.Limit{Rate: 0, Period: time.Second}); !errors.Is(err, limiter.ErrInvalidLimit) {
		t.Errorf("bad limit: %v", err)
	}
}

// TestQuotaLeaseNeverOverAdmits: four Limiters (four processes) with
// leases of 10 decide one hot subject from 64 callers against 300 per
// second for 3.5 seconds on a redis-server: no window admits more than
// 300 (checked on the server's counter, which holds every leased unit, and
// on the admissions counted per window by their leases' windows), and all
// of them together admit at least what the windows allowed less the
// unused leases (at most 9 per process per window).
func TestQuotaLeaseNeverOverAdmits(t *testing.T) {
	srv := redistest.StartServer(t)
	const procs, callers, rate, units = 4, 64, 300, 10
	l := limiter.PerSecond(rate)
	lims := make([]*limiter.Limiter, procs)
	for i := range lims {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: callers})
		t.Cleanup(func() { _ = rdb.Close() })
		var err error
		lims[i], err = limiter.New(goredis.New(rdb), strategy.NewFixedWindow(), limiter.WithQuotaLease(units), limiter.WithTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	key, _ := limiter.Key(limiter.DefaultPrefix, "hot", l)
	ctx := context.Background()
	var admitted, leased, errs atomic.Int64
	var firstErr atomic.Value
	stop := time.Now().Add(3500 * time.Millisecond)
	// A sampler reads the counter: no window's count may pass the rate.
	var maxCount atomic.Int64
	var wg sync.WaitGroup
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if n, err := rdb.Get(ctx, key).Int64(); err == nil && n > maxCount.Load() {
				maxCount.Store(n)
			}
		}
	}()
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lim := lims[c%procs]
			for time.Now().Before(stop) {
				r, err := lim.Allow(ctx, "hot", l)
				switch {
				case err != nil:
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err)
				case r.Allowed:
					admitted.Add(1)
					if r.Leased {
						leased.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	if n := errs.Load(); n > 0 {
		t.Fatalf("%d calls failed, e.g. %v", n, firstErr.Load())
	}
	// 3.5 s of 1 s windows that start at a first request: at most 5
	// windows overlap the run.
	a := admitted.Load()
	t.Logf("admitted %d (%d from leases) in 3.5 s at %d per second; the counter peaked at %d", a, leased.Load(), rate, maxCount.Load())
	if m := maxCount.Load(); m > rate {
		t.Errorf("a window's counter reached %d, above the rate %d", m, rate)
	}
	if a > 5*rate {
		t.Errorf("admitted %d in 3.5 s of 1 s windows at %d: more than 5 windows' worth", a, rate)
	}
	if a < 3*(rate-procs*(units-1)) {
		t.Errorf("admitted %d: fewer than 3 full windows less the unused leases (%d)", a, 3*(rate-procs*(units-1)))
	}
	if leased.Load() < a/2 {
		t.Errorf("only %d of %d admissions came from leases", leased.Load(), a)
	}
}

// TestQuotaLeaseAlignedWindow: AlignedWindow leases as FixedWindow does: a
// hot subject takes 10 units of its window in one script and is admitted 9
// more times from them; the window's counter holds whole leases; with
// fewer than a lease left, calls go to Redis one by one, and the window
// admits exactly its rate.
func TestQuotaLeaseAlignedWindow(t *testing.T) {
	m, st := newMiniFastFail(t)
	// a minute into an hour of the server's clock: the window stays put
	now := m.Now()
	m.Advance(now.Truncate(time.Hour).Add(time.Hour + time.Minute).Sub(now))
	ec := &evalCounter{Store: st}
	lim, err := limiter.New(ec, strategy.NewAlignedWindow(), limiter.WithQuotaLease(10))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := lim.Allow(ctx, "warm-up", limiter.PerHour(1)); err != nil { // loads the script
		t.Fatal(err)
	}
	l := limiter.PerHour(25)
	key, err := limiter.Key(limiter.DefaultPrefix, "hot", l)
	if err != nil {
		t.Fatal(err)
	}
	counted := func() int64 { // the count of the server's current window
		k := strategy.AlignedWindowKey(key, time.Hour, m.Now().UnixMilli()/time.Hour.Milliseconds())
		v, err := m.Get(k)
		if err != nil {
			t.Fatalf("counter %s: %v", k, err)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("counter %s holds %q", k, v)
		}
		return strategy.AlignedCountBase - n
	}
	ec.n.Store(0)
	for i := range 10 {
		r, err := lim.Allow(ctx, "hot", l)
		if err != nil || !r.Allowed || !r.Leased || r.Remaining != int64(24-i) || r.ResetAfter <= 0 || r.ResetAfter > 59*time.Minute {
			t.Fatalf("call %d: %+v, %v; want admitted from the lease, %d remaining, reset within the window's 59 minutes", i, r, err, 24-i)
		}
	}
	if n, c := ec.n.Load(), counted(); n != 1 || c != 10 {
		t.Errorf("10 calls: %d scripts, %d counted; want 1 script (the lease) and 10", n, c)
	}
	admitted, leased := 10, 10
	for range 20 {
		r, err := lim.Allow(ctx, "hot", l)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			admitted++
		}
		if r.Leased {
			leased++
		}
	}
	// a second lease of 10; a third refused (5 left), then 5 calls of one
	// unit and 5 denials
	if n, c := ec.n.Load(), counted(); admitted != 25 || leased != 20 || c != 25 || n != 13 {
		t.Errorf("30 calls of 25 per hour: %d admitted (%d from leases), %d counted, %d scripts; want 25 (20), 25, 13", admitted, leased, c, n)
	}
}
