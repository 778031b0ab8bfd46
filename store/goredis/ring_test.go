package goredis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// TestRingTransactionOnTheKeysShard: a transaction (Bucketed's MULTI;
// TIME; INCRBY; PEXPIREAT; EXEC) through a Store on a *redis.Ring runs
// whole on the shard of its key. go-redis's Ring TxPipeline would send the
// keyless TIME to another shard, in a transaction of its own, so the
// window and the expiry came from another server's clock.
func TestRingTransactionOnTheKeysShard(t *testing.T) {
	ctx := context.Background()
	// Two shards whose clocks are a period apart: read from the other
	// shard, TIME names another window and an expiry a minute away from
	// the key's server's clock.
	t.Run("miniredis", func(t *testing.T) {
		a, b := miniredis.RunT(t), miniredis.RunT(t)
		now := time.Now().Truncate(time.Minute).Add(20 * time.Second)
		a.SetTime(now)
		b.SetTime(now.Add(time.Minute))
		ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}, MaxRetries: -1})
		t.Cleanup(func() { _ = ring.Close() })
		lim, err := limiter.New(goredis.New(ring), strategy.NewBucketed())
		if err != nil {
			t.Fatal(err)
		}
		admitted := 0
		for i := range 12 {
			r, err := lim.Allow(ctx, "u1", limiter.PerMinute(5))
			if err != nil {
				t.Fatalf("call %d: %v", i+1, err)
			}
			if r.Allowed {
				admitted++
			}
		}
		if r, err := lim.AllowN(ctx, "u1", 0, limiter.PerMinute(5)); err != nil || r.Remaining != 0 {
			t.Errorf("peek after 12 calls = %+v, %v; want 0 remaining", r, err)
		}
		if admitted != 5 {
			t.Errorf("admitted %d of 12 calls at 5 per minute within one minute, want 5", admitted)
		}
		for _, m := range []*miniredis.Miniredis{a, b} {
			for _, k := range m.Keys() {
				if ttl := m.TTL(k); ttl <= 0 || ttl > 2*time.Minute {
					t.Errorf("key %s on %s has TTL %v, want within (0, 2m]", k, m.Addr(), ttl)
				}
			}
		}
	})
	// On real servers: the shard that holds no key runs no transaction
	// (Bucketed's one TIME per store, to learn the servers' clock, may go
	// to either shard: it names no key).
	t.Run("redis-server", func(t *testing.T) {
		sa, sb := redistest.StartServer(t), redistest.StartServer(t)
		ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": sa.Addr(), "b": sb.Addr()}, MaxRetries: -1})
		t.Cleanup(func() { _ = ring.Close() })
		lim, err := limiter.New(goredis.New(ring), strategy.NewBucketed())
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if r, err := lim.Allow(ctx, "u1", limiter.PerMinute(100)); err != nil || !r.Allowed {
				t.Fatalf("call %d = %+v, %v; want admitted", i+1, r, err)
			}
		}
		if r, err := lim.AllowN(ctx, "u1", 0, limiter.PerMinute(100)); err != nil || r.Remaining != 90 {
			t.Errorf("peek after 10 admissions = %+v, %v; want 90 remaining", r, err)
		}
		holders := 0
		for _, addr := range []string{sa.Addr(), sb.Addr()} {
			c := redis.NewClient(&redis.Options{Addr: addr})
			n, err1 := c.DBSize(ctx).Result()
			stats, err2 := c.Info(ctx, "commandstats").Result()
			_ = c.Close()
			if err1 != nil || err2 != nil {
				t.Fatalf("%s: %v, %v", addr, err1, err2)
			}
			if n > 0 {
				holders++
				continue
			}
			for _, cmd := range []string{"cmdstat_multi:", "cmdstat_exec:"} {
				if strings.Contains(stats, cmd) {
					t.Errorf("%s holds no key of the subject, yet its commandstats count %s", addr, strings.TrimSuffix(cmd, ":"))
				}
			}
		}
		if holders != 1 {
			t.Errorf("%d shards hold the subject's keys, want 1", holders)
		}
	})
}
