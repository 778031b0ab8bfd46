package rules_test

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
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

const prefix = "rt"

// backend is one Redis the tests run on.
type backend struct {
	rdb  *redis.Client
	st   store.Store
	mini *redistest.Mini // nil on a real server
}

// eachBackend runs f on a fresh miniredis and on a fresh redis-server (when
// installed; REQUIRE_REDIS=1 makes it required).
func eachBackend(t *testing.T, f func(t *testing.T, b *backend)) {
	t.Run("miniredis", func(t *testing.T) {
		m := redistest.NewMini(t)
		f(t, newBackend(t, m.Addr(), m))
	})
	t.Run("redis-server", func(t *testing.T) {
		s := redistest.StartServer(t)
		f(t, newBackend(t, s.Addr(), nil))
	})
}

func newBackend(t *testing.T, addr string, m *redistest.Mini) *backend {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	return &backend{rdb: rdb, st: goredis.New(rdb), mini: m}
}

func newLimiter(t *testing.T, st store.Store, opts ...limiter.Option) *limiter.Limiter {
	t.Helper()
	lim, err := limiter.New(st, strategy.NewFixedWindow(), append([]limiter.Option{limiter.WithPrefix(prefix)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// counter reads the counter of subject's rule l from Redis.
func (b *backend) counter(t *testing.T, subject string, l limiter.Limit) int64 {
	t.Helper()
	key, err := limiter.Key(prefix, subject, l)
	if err != nil {
		t.Fatal(err)
	}
	v, err := b.rdb.Get(context.Background(), key).Result()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// hset writes subject's rules to the hash in one HSET.
func (b *backend) hset(t *testing.T, hash, subject string, value string) {
	t.Helper()
	if err := b.rdb.HSet(context.Background(), hash, subject, value).Err(); err != nil {
		t.Fatal(err)
	}
}

func rulesJSON(t *testing.T, ls ...limiter.Limit) string {
	t.Helper()
	v, err := rules.FormatRules(ls)
	if err != nil {
		t.Fatal(err)
	}
	return string(v)
}

var (
	qps = limiter.PerSecond(10).Named("qps")
	qpd = limiter.PerDay(100).Named("qpd")
)

// TestTenPerSecondHundredPerDay: a subject with 10/s and 100/day rules in
// a rules hash admits exactly 10 of 20 concurrent requests, and both
// counters read 10: the requests refused by the per-second rule consumed
// nothing from the daily one.
func TestTenPerSecondHundredPerDay(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ctx := context.Background()
		// On a real server the 1 s window runs in real time: an attempt that
		// took too long to be inside one window is repeated on a fresh
		// subject rather than judged.
		for attempt := 1; ; attempt++ {
			subject := "app" + strconv.Itoa(attempt) + "-order.create"
			b.hset(t, "limits", subject, rulesJSON(t, qps, qpd))
			rl, err := rules.New(ctx, newLimiter(t, b.st), rules.RedisHash{Store: b.st, Key: "limits"})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			var allowed, denied atomic.Int64
			var wg sync.WaitGroup
			for i := 0; i < 20; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					d, err := rl.Allow(ctx, subject)
					switch {
					case err != nil:
						t.Error(err)
					case d.Allowed:
						allowed.Add(1)
					default:
						denied.Add(1)
						if d.Limit.Name != "qps" || d.RetryAfter <= 0 || d.RetryAfter > time.Second || d.Default || len(d.Rules) != 2 {
							t.Errorf("denial %+v: want bound by qps with RetryAfter in (0, 1s]", d)
						}
					}
				}()
			}
			wg.Wait()
			nQPS, nQPD := b.counter(t, subject, qps), b.counter(t, subject, qpd)
			if b.mini == nil && time.Since(start) > 700*time.Millisecond && attempt < 3 {
				t.Logf("attempt %d took %s; repeating", attempt, time.Since(start))
				continue
			}
			if allowed.Load() != 10 || denied.Load() != 10 {
				t.Errorf("admitted %d, denied %d of 20; want exactly 10 and 10", allowed.Load(), denied.Load())
			}
			if nQPS != 10 || nQPD != 10 {
				t.Errorf("counters qps=%d qpd=%d; want both 10", nQPS, nQPD)
			}
			return
		}
	})
}

// waitReload waits for the reload hook to report.
func waitReload(t *testing.T, ch <-chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(within):
		t.Fatalf("no reload reported within %s", within)
		return nil
	}
}

// TestHashEditReloads: an edit of the hash takes effect within the reload
// interval (plus a generous margin for a loaded machine), and no counter is
// reset: the edited rule keeps its window's count, the others and other
// subjects are untouched, and a new rule starts at the reload.
func TestHashEditReloads(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		qpm := limiter.PerMinute(5).Named("qpm")
		b.hset(t, "limits", "app-a", rulesJSON(t, qpm, qpd))
		b.hset(t, "limits", "app-b", rulesJSON(t, qpm))
		reloads := make(chan error, 10)
		const interval = 50 * time.Millisecond
		rl, err := rules.New(ctx, newLimiter(t, b.st), rules.RedisHash{Store: b.st, Key: "limits"},
			rules.WithInterval(interval), rules.WithReloadHook(func(err error) { reloads <- err }))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- rl.Watch(ctx) }()
		for i := 0; i < 3; i++ {
			if d, err := rl.Allow(ctx, "app-a"); err != nil || !d.Allowed {
				t.Fatalf("app-a call %d: %+v, %v", i, d, err)
			}
		}
		for i := 0; i < 2; i++ {
			if d, err := rl.Allow(ctx, "app-b"); err != nil || !d.Allowed {
				t.Fatalf("app-b call %d: %+v, %v", i, d, err)
			}
		}

		// qpm 5 -> 4 and a new hourly rule.
		qpm4, qph := qpm, limiter.PerHour(50).Named("qph")
		qpm4.Rate = 4
		edited := time.Now()
		b.hset(t, "limits", "app-a", rulesJSON(t, qpm4, qpd, qph))
		if err := waitReload(t, reloads, 5*time.Second); err != nil {
			t.Fatalf("reload: %v", err)
		}
		took := time.Since(edited)
		t.Logf("edit took effect after %s (interval %s)", took, interval)
		if took > 40*interval {
			t.Errorf("edit took effect after %s; interval %s", took, interval)
		}
		if got, _ := rl.Rules("app-a"); len(got) != 3 || got[0].Rate != 4 {
			t.Fatalf("rules after reload: %v", got)
		}
		if n := b.counter(t, "app-a", qpm); n != 3 {
			t.Errorf("qpm counter after the reload = %d, want 3 (not reset)", n)
		}
		d, err := rl.Allow(ctx, "app-a")
		if err != nil || !d.Allowed || d.Remaining != 0 || d.Limit.Name != "qpm" {
			t.Errorf("4th call under qpm=4: %+v, %v; want admitted, qpm binding with 0 remaining", d, err)
		}
		d, err = rl.Allow(ctx, "app-a")
		if err != nil || d.Allowed || d.Limit.Name != "qpm" {
			t.Errorf("5th call under qpm=4: %+v, %v; want denied by qpm", d, err)
		}
		for _, c := range []struct {
			subject string
			l       limiter.Limit
			want    int64
		}{{"app-a", qpm, 4}, {"app-a", qpd, 4}, {"app-a", qph, 1}, {"app-b", qpm, 2}} {
			if n := b.counter(t, c.subject, c.l); n != c.want {
				t.Errorf("counter %s/%s = %d, want %d", c.subject, c.l.Name, n, c.want)
			}
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Watch returned %v, want context.Canceled", err)
		}
	})
}

// TestMalformedRuleKeepsOldRules: a bad edit is reported (once, naming the
// field) and the last good rules stay in force; fixing it is reported too.
func TestMalformedRuleKeepsOldRules(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		qpm := limiter.PerMinute(5).Named("qpm")
		b.hset(t, "limits", "app-a", rulesJSON(t, qpm))
		reloads := make(chan error, 10)
		rl, err := rules.New(ctx, newLimiter(t, b.st), rules.RedisHash{Store: b.st, Key: "limits"},
			rules.WithInterval(20*time.Millisecond), rules.WithReloadHook(func(err error) { reloads <- err }))
		if err != nil {
			t.Fatal(err)
		}

		for _, bad := range []struct{ value, field string }{
			{`not json`, `"app-a"`},
			{`[{"name":"qpm","rate":-1,"period":"1m"}]`, `"app-a"[0].rate`},
			{`[{"name":"qpm","rate":5,"period":"1 minute"}]`, `"app-a"[0].period`},
			{`[{"name":"qpm","rate":5,"period":"1m","cost":2}]`, `"app-a"[0].cost`},
			{`[]`, `"app-a"`},
		} {
			b.hset(t, "limits", "app-a", bad.value)
			changed, err := rl.Reload(ctx)
			var ce *rules.ConfigError
			if changed || !errors.Is(err, rules.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != bad.field || ce.Source != `redis hash "limits"` {
				t.Errorf("%s: Reload = %v, %v; want a ConfigError for field %s", bad.value, changed, err, bad.field)
			}
			if rl.LastError() == nil {
				t.Errorf("%s: LastError is nil after a failed load", bad.value)
			}
			if got, _ := rl.Rules("app-a"); len(got) != 1 || got[0] != qpm {
				t.Errorf("%s: rules in force %v; want the last good %v", bad.value, got, qpm)
			}
		}
		// The old rules still decide: 5 admitted, then qpm refuses.
		for i := 0; i < 6; i++ {
			d, err := rl.Allow(ctx, "app-a")
			if err != nil || d.Allowed != (i < 5) {
				t.Errorf("call %d under the last good rules: %+v, %v", i, d, err)
			}
		}

		// Watch reports a persistent failure once, then the recovery.
		go func() { _ = rl.Watch(ctx) }()
		err = waitReload(t, reloads, 5*time.Second)
		var ce *rules.ConfigError
		if !errors.As(err, &ce) || ce.Field != `"app-a"` {
			t.Errorf("Watch reported %v; want the empty list of app-a", err)
		}
		time.Sleep(150 * time.Millisecond) // several polls of the same bad hash
		select {
		case err := <-reloads:
			t.Errorf("the same failure was reported again: %v", err)
		default:
		}
		b.hset(t, "limits", "app-a", rulesJSON(t, qpm.Named("qpm2")))
		if err := waitReload(t, reloads, 5*time.Second); err != nil {
			t.Errorf("after the fix Watch reported %v; want nil", err)
		}
		if rl.LastError() != nil {
			t.Errorf("LastError after a good load: %v", rl.LastError())
		}
		if d, err := rl.Allow(ctx, "app-a"); err != nil || !d.Allowed || d.Limit.Name != "qpm2" {
			t.Errorf("under the fixed rules: %+v, %v", d, err)
		}
	})
}

// TestEmptyHash: a missing hash is ErrEmpty unless AllowEmpty, and a hash
// emptied while in use keeps the last good rules.
func TestEmptyHash(t *testing.T) {
	m := redistest.NewMini(t)
	b := newBackend(t, m.Addr(), m)
	ctx := context.Background()
	lim := newLimiter(t, b.st)
	if _, err := rules.New(ctx, lim, rules.RedisHash{Store: b.st, Key: "none"}); !errors.Is(err, rules.ErrEmpty) {
		t.Errorf("missing hash: %v, want ErrEmpty", err)
	}
	rl, err := rules.New(ctx, lim, rules.RedisHash{Store: b.st, Key: "none", AllowEmpty: true, Default: rules.AllowUnknown()})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := rl.Allow(ctx, "x"); err != nil || !d.Allowed || !d.Default {
		t.Errorf("empty hash allowed: %+v, %v", d, err)
	}

	b.hset(t, "h", "s", rulesJSON(t, qps))
	rl, err = rules.New(ctx, lim, rules.RedisHash{Store: b.st, Key: "h"})
	if err != nil {
		t.Fatal(err)
	}
	m.Del("h")
	if _, err := rl.Reload(ctx); !errors.Is(err, rules.ErrEmpty) {
		t.Errorf("deleted hash: %v, want ErrEmpty", err)
	}
	if got, own := rl.Rules("s"); !own || len(got) != 1 {
		t.Errorf("rules of s after the hash vanished: %v %v", got, own)
	}
	if err := b.rdb.Set(ctx, "str", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := rules.New(ctx, lim, rules.RedisHash{Store: b.st, Key: "str"}); err == nil {
		t.Error("a string key loaded as a rule hash")
	}
}

// TestReloadReadsOnly: a reload sends one HGETALL and writes nothing; with
// Redis down it fails, and the rules in force stay.
func TestReloadReadsOnly(t *testing.T) {
	m := redistest.NewMini(t)
	b := newBackend(t, m.Addr(), m)
	ctx := context.Background()
	b.hset(t, "h", "s", rulesJSON(t, qps, qpd))
	rl, err := rules.New(ctx, newLimiter(t, b.st), rules.RedisHash{Store: b.st, Key: "h"})
	if err != nil {
		t.Fatal(err)
	}
	b.hset(t, "h", "s", rulesJSON(t, qpd, qps))
	before := m.CommandCount()
	if changed, err := rl.Reload(ctx); !changed || err != nil {
		t.Fatalf("Reload = %v, %v", changed, err)
	}
	if n := m.CommandCount() - before; n != 1 {
		t.Errorf("a reload sent %d commands, want 1 (HGETALL)", n)
	}
	if keys := m.Keys(); len(keys) != 1 || keys[0] != "h" {
		t.Errorf("keys after a reload: %v", keys)
	}
	m.Close()
	_, err = rl.Reload(ctx)
	if err == nil || errors.Is(err, rules.ErrInvalidConfig) || rl.LastError() == nil {
		t.Errorf("Reload with Redis down = %v (LastError %v); want the store's error", err, rl.LastError())
	}
	if got, _ := rl.Rules("s"); len(got) != 2 || got[0] != qpd {
		t.Errorf("rules after a failed reload: %v", got)
	}
}
