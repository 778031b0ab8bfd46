package redigo_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/internal/adaptertest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/redigo"
)

// newPool is the pool the package documentation recommends, with size
// connections at most and a read timeout of 1 s.
func newPool(addr string, size int) *redis.Pool { return newPoolReading(addr, size, time.Second) }

// checkReadTimeout is the read timeout of the connections the conformance
// checks use. redigo ends a call at its read timeout even when the call's
// context allows longer (DoContext), and the checks that count under load
// give each call up to minutes: on a busy 2-core machine under the race
// detector, a sliding log's call on the embedded server, queued behind 15
// others, has taken over a second. The checks of deadlines and faults set
// their own, shorter, deadlines.
const checkReadTimeout = 30 * time.Second

// newPoolReading is newPool with the read timeout rt.
func newPoolReading(addr string, size int, rt time.Duration) *redis.Pool {
	nd := &net.Dialer{Timeout: time.Second, KeepAlive: time.Minute}
	return &redis.Pool{
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redigo.Dial(ctx, nd, "tcp", addr,
				redis.DialReadTimeout(rt),
				redis.DialWriteTimeout(time.Second))
		},
		TestOnBorrow: redigo.TestOnBorrow,
		MaxActive:    size,
		MaxIdle:      size,
		Wait:         true,
		IdleTimeout:  time.Minute,
	}
}

func dial(_ context.Context, addr string) (store.Store, func(), error) {
	p := newPoolReading(addr, 16, checkReadTimeout)
	return redigo.New(p), func() { _ = p.Close() }, nil
}

// TestConformance runs the store checks and every check of every strategy
// on miniredis, on redis-server and on a Cluster. The three run in
// parallel: each check has a server of its own, or, on the shared Cluster,
// keys of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	t.Run("miniredis", func(t *testing.T) {
		t.Parallel()
		conformance.RunStoreTests(t, conformance.Miniredis(dial))
	})
	t.Run("redis-server", func(t *testing.T) {
		t.Parallel()
		conformance.RunStoreTests(t, conformance.RedisServer(dial))
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		conformance.RunStoreTests(t, conformance.RedisCluster(t, dialCluster, dial))
	})
}

func dialCluster(_ context.Context, addrs []string) (store.Store, func(), error) {
	c := clusterFor(addrs)
	if err := c.Refresh(); err != nil {
		_ = c.Close()
		return nil, nil, err
	}
	return redigo.New(redigo.Cluster(c)), func() { _ = c.Close() }, nil
}

// TestConformanceTLS runs the core and fault checks on a TLS-only server.
func TestConformanceTLS(t *testing.T) { adaptertest.ConformanceTLS(t, dialTLS) }

// dialTLS connects a store over TLS with cfg.
func dialTLS(cfg *tls.Config) conformance.Dialer {
	return func(_ context.Context, addr string) (store.Store, func(), error) {
		nd := &net.Dialer{Timeout: time.Second, KeepAlive: time.Minute}
		p := &redis.Pool{
			DialContext: func(ctx context.Context) (redis.Conn, error) {
				return redigo.Dial(ctx, nd, "tcp", addr,
					redis.DialReadTimeout(checkReadTimeout), redis.DialWriteTimeout(time.Second),
					redis.DialUseTLS(true), redis.DialTLSConfig(cfg))
			},
			TestOnBorrow: redigo.TestOnBorrow,
			MaxActive:    16,
			MaxIdle:      16,
			Wait:         true,
			IdleTimeout:  time.Minute,
		}
		return redigo.New(p), func() { _ = p.Close() }, nil
	}
}

// TestManySubjects: 100 000 subjects leave no key after their window and
// no growth of the client's heap.
func TestManySubjects(t *testing.T) { adaptertest.ManySubjects(t, dial) }

// TestQuotaLeases runs the checks of admission with quota leases on, on
// the virtual clock and on a real one (a lease lives in the process: the
// Cluster adds nothing to prove).
func TestQuotaLeases(t *testing.T) {
	adaptertest.QuotaLeases(t, map[string]conformance.HarnessMaker{
		"miniredis":    conformance.Miniredis(dial),
		"redis-server": conformance.RedisServer(dial),
	})
}

// TestUnservedSlot: a Cluster slot without a node fails only its own
// commands of a Batch, and AllowMany decides the asks beside it.
func TestUnservedSlot(t *testing.T) { conformance.UnservedSlot(t, dialCluster, dial) }

// TestMigratingSlot: decisions stay exact while a Cluster slot moves
// (ASK, MOVED), one by one and in an AllowMany.
func TestMigratingSlot(t *testing.T) { conformance.MigratingSlot(t, dialCluster, dial) }

// TestFailingOver: decisions stay exact while a Cluster master fails over
// to a replica that joined after the store read the slot map.
func TestFailingOver(t *testing.T) { conformance.FailingOver(t, dialCluster, dial) }
