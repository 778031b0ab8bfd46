package goredis_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// dial uses go-redis's default options on purpose: MaxRetries is 3, so the
// lost-reply check proves the adapter's guard, not a retry-free client.
func dial(_ context.Context, addr string) (store.Store, func(), error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	return goredis.New(rdb), func() { _ = rdb.Close() }, nil
}

func TestConformance(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		conformance.RunStoreTests(t, conformance.Miniredis(dial))
	})
	t.Run("redis-server", func(t *testing.T) {
		conformance.RunStoreTests(t, conformance.RedisServer(dial))
	})
	t.Run("cluster", func(t *testing.T) {
		conformance.RunStoreTests(t, conformance.RedisCluster(t, dialCluster, dial))
	})
}

func dialCluster(_ context.Context, addrs []string) (store.Store, func(), error) {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	return goredis.New(rdb), func() { _ = rdb.Close() }, nil
}
