package goredis_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/adaptertest"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store/goredis"
)

// TestOneServer: a Store on a *redis.Client says that one server holds
// every key, and AllowMany sends one script call for 8 asks; with
// WithShardingProxy it says not, and sends one per ask, as it does on a
// ClusterClient, a Ring or an AutoPipeliner.
func TestOneServer(t *testing.T) {
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	adaptertest.AllowManyCalls(t, goredis.New(rdb), true)
	adaptertest.AllowManyCalls(t, goredis.New(rdb, goredis.WithShardingProxy()), false)
	adaptertest.AllowManyCalls(t, goredis.New(rdb, goredis.WithAutoPipeline(), goredis.WithShardingProxy()), false)

	ap, err := rdb.AutoPipeline()
	if err != nil {
		t.Fatal(err)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr()}})
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": srv.Addr()}})
	t.Cleanup(func() { _ = cc.Close(); _ = ring.Close() })
	for name, c := range map[string]redis.UniversalClient{"ClusterClient": cc, "Ring": ring, "AutoPipeliner": ap} {
		if goredis.New(c).OneServer() {
			t.Errorf("a Store on a %s says one server holds every key", name)
		}
	}
}
