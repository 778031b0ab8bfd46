package strategy_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	redigo "github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	redigostore "github.com/quotagate/limiter/store/redigo"
	rueidisstore "github.com/quotagate/limiter/store/rueidis"
	"github.com/quotagate/limiter/strategy"
)

// TestACLCommandsInREADMEOnACluster: on a Redis Cluster, the README's
// FixedWindow row plus its Cluster row are enough for each of the three
// clients.
func TestACLCommandsInREADMEOnACluster(t *testing.T) {
	rows := readmeACL(t)
	c := redistest.StartCluster(t)
	ctx := context.Background()
	args := []any{"ACL", "SETUSER", "u-cluster", "reset", "on", ">pw", "~t:*"}
	cluster, ok := rows["on a Cluster"]
	if !ok {
		t.Fatal("README's ACL table has no row for a Cluster")
	}
	for _, cmd := range append(append([]string(nil), rows["FixedWindow"]...), cluster...) {
		args = append(args, "+"+strings.ToLower(cmd))
	}
	for _, addr := range c.Addrs() {
		node := redis.NewClient(&redis.Options{Addr: addr})
		err := node.Do(ctx, args...).Err()
		_ = node.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	gr := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), Username: "u-cluster", Password: "pw"})
	t.Cleanup(func() { _ = gr.Close() })
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs(), Username: "u-cluster", Password: "pw", DisableCache: true, Dialer: net.Dialer{KeepAlive: -1, KeepAliveConfig: net.KeepAliveConfig{Enable: true}}})
	if err != nil {
		t.Fatalf("rueidis: %v", err)
	}
	t.Cleanup(rc.Close)
	rd := &redisc.Cluster{
		StartupNodes: c.Addrs(),
		DialOptions:  []redigo.DialOption{redigo.DialUsername("u-cluster"), redigo.DialPassword("pw"), redigo.DialConnectTimeout(time.Second)},
		CreatePool: func(addr string, opts ...redigo.DialOption) (*redigo.Pool, error) {
			return &redigo.Pool{Dial: func() (redigo.Conn, error) { return redigo.Dial("tcp", addr, opts...) }, MaxIdle: 4}, nil
		},
	}
	t.Cleanup(func() { _ = rd.Close() })
	for name, st := range map[string]store.Store{"goredis": goredis.New(gr), "rueidis": rueidisstore.New(rc), "redigo": redigostore.New(redigostore.Cluster(rd))} {
		t.Run(name, func(t *testing.T) {
			lim := newLim(t, st, strategy.NewFixedWindow())
			three := limiter.PerMinute(3)
			for _, subject := range []string{"a", "b", "c", "d", "e", "f"} { // several slots
				for i := range 4 {
					if r, err := lim.Allow(ctx, name+subject, three); err != nil || r.Allowed != (i < 3) {
						t.Fatalf("%s, call %d: %+v, %v; want allowed=%v", subject, i+1, r, err, i < 3)
					}
				}
			}
		})
	}
}
