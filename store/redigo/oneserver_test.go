package redigo_test

import (
	"testing"

	"github.com/mna/redisc"

	"github.com/quotagate/limiter/internal/adaptertest"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store/redigo"
)

// TestOneServer: a Store on a *redis.Pool says that one server holds every
// key, and AllowMany sends one script call for 8 asks; with
// WithShardingProxy it says not, and sends one per ask, as it does on a
// Cluster.
func TestOneServer(t *testing.T) {
	p := newPool(redistest.StartServer(t).Addr(), 4)
	t.Cleanup(func() { _ = p.Close() })
	adaptertest.AllowManyCalls(t, redigo.New(p), true)
	adaptertest.AllowManyCalls(t, redigo.New(p, redigo.WithShardingProxy()), false)
	if redigo.New(redigo.Cluster(&redisc.Cluster{StartupNodes: []string{"127.0.0.1:1"}})).OneServer() {
		t.Error("a Store on a Cluster says one server holds every key")
	}
}
