package goredis_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/adaptertest"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store/goredis"
)

// A command that changes a connection's state (a lone MULTI, WATCH,
// SUBSCRIBE) is refused before it is sent, on one server and on a Cluster.
func TestConnCommandsRefused(t *testing.T) {
	t.Run("server", func(t *testing.T) {
		rdb := redis.NewClient(&redis.Options{Addr: redistest.StartServer(t).Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		adaptertest.ConnCommands(t, goredis.New(rdb))
	})
	t.Run("cluster", func(t *testing.T) {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.StartCluster(t).Addrs()})
		t.Cleanup(func() { _ = rdb.Close() })
		adaptertest.ConnCommands(t, goredis.New(rdb))
	})
}
