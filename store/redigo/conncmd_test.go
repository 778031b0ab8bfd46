package redigo_test

import (
	"testing"

	"github.com/gomodule/redigo/redis"

	"github.com/quotagate/limiter/internal/adaptertest"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store/redigo"
)

// A command that changes a connection's state (a lone MULTI, WATCH,
// SUBSCRIBE) is refused before it is sent, on one server and on a Cluster.
func TestConnCommandsRefused(t *testing.T) {
	t.Run("server", func(t *testing.T) {
		addr := redistest.StartServer(t).Addr()
		p := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", addr) }}
		t.Cleanup(func() { _ = p.Close() })
		adaptertest.ConnCommands(t, redigo.New(p))
	})
	t.Run("cluster", func(t *testing.T) {
		adaptertest.ConnCommands(t, redigo.New(redigo.Cluster(newCluster(t, redistest.StartCluster(t).Addrs()))))
	})
}
