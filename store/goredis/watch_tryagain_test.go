package goredis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
)

func clusterNode(t *testing.T, addr, cmd string, args ...any) (any, error) {
	t.Helper()
	c, err := redis.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.Do(cmd, args...)
}

// store.Tx: a command of the watched slot refused with TRYAGAIN (the
// slot migrating since the WATCH) is ErrTxAborted, in Exec and in Do.
func TestWatchTryAgainIsTxAborted(t *testing.T) {
	for _, exec := range []bool{true, false} {
		cl := redistest.StartCluster(t)
		addrs := cl.Addrs()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, closeSt, err := dialCluster(ctx, addrs)
		if err != nil {
			t.Fatal(err)
		}
		k1, k2 := "{g}a", "{g}b"
		from := -1
		ids := make([]string, len(addrs))
		for i, a := range addrs {
			if _, err := clusterNode(t, a, "GET", k1); err == nil {
				from = i
			}
			id, _ := redis.String(clusterNode(t, a, "CLUSTER", "MYID"))
			ids[i] = id
		}
		to := (from + 1) % len(addrs)
		clusterNode(t, addrs[from], "MSET", k1, "1", k2, "1")
		slot, _ := redis.Int(clusterNode(t, addrs[from], "CLUSTER", "KEYSLOT", k1))
		var got error
		werr := st.(store.Watcher).Watch(ctx, []string{k1}, func(tx store.Tx) error {
			host, port, _ := strings.Cut(addrs[to], ":")
			clusterNode(t, addrs[to], "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[from])
			clusterNode(t, addrs[from], "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to])
			if _, err := clusterNode(t, addrs[from], "MIGRATE", host, port, "", 0, 5000, "KEYS", k1); err != nil {
				t.Fatal(err)
			}
			if exec {
				_, got = tx.Exec(ctx, store.Cmd{Name: "MSET", Args: []any{k1, "2", k2, "2"}})
			} else {
				var rs []store.Reply
				rs, got = tx.Do(ctx, store.Cmd{Name: "MGET", Args: []any{k1, k2}})
				if got == nil && rs[0].Err != nil {
					got = rs[0].Err
				}
			}
			return got
		})
		closeSt()
		cancel()
		if !errors.Is(got, store.ErrTxAborted) {
			t.Errorf("exec=%v: keys split by the migration (TRYAGAIN): %v (Watch: %v); want store.ErrTxAborted", exec, got, werr)
		}
	}
}
