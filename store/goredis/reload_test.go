package goredis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// TestClusterReloadsSlotsWhenAMasterCannotBeReached: a master that dies
// sends no MOVED, and go-redis reads the slot map again only after a
// redirection or every ClusterStateReloadInterval (a minute by default),
// so that every call on its slots failed for up to a minute after a
// replica had taken over (measured: 54 s). The Store's client reloads the
// map (CLUSTER SLOTS, on a node still up) as soon as a dial fails.
func TestClusterReloadsSlotsWhenAMasterCannotBeReached(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cluster := redistest.StartCluster(t)
	addrs := cluster.Addrs()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRetries: -1})
	defer cc.Close()
	st := goredis.New(cc)
	key := "{reload}k"
	if _, err := st.Do(ctx, store.Cmd{Name: "SET", Args: []any{key, "1"}}); err != nil {
		t.Fatal(err)
	}
	master, err := cc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var others []*redis.Client
	for _, a := range addrs {
		if a == master.Options().Addr {
			continue
		}
		n := redis.NewClient(&redis.Options{Addr: a})
		defer n.Close()
		if err := n.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		others = append(others, n)
	}
	// The master goes away; the client's pooled connections to it break.
	dead, err := cluster.StopMasterOf(key)
	if err != nil || dead != master.Options().Addr {
		t.Fatalf("stopped %s (%v); want the key's master, %s", dead, err, master.Options().Addr)
	}
	for range 3 {
		_, _ = st.Do(ctx, store.Cmd{Name: "GET", Args: []any{key}})
	}
	reloads := func() int {
		n := 0
		for _, o := range others {
			info, _ := o.Info(ctx, "commandstats").Result()
			if strings.Contains(info, "cmdstat_cluster|slots:") {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(3 * time.Second)
	for reloads() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if reloads() == 0 {
		t.Errorf("calls on a slot of %s, shut down: no CLUSTER SLOTS on the nodes still up within 3 s; want the slot map read again after the failed dial", dead)
	}
}
