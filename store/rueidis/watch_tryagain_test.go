package rueidis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quotagate/limiter/store"
)

// store.Tx: "A command on a key of the watched keys' slot that a Cluster
// node refused because the slot moved after the WATCH (MOVED, ASK,
// TRYAGAIN), as in a failover or a slot's migration, makes Do return an
// error that wraps ErrTxAborted, as Exec does".
func TestClusterWatchTryAgainIsTxAborted(t *testing.T) {
	for _, exec := range []bool{true, false} {
		keys := []string{"{u}a", "{u}b"}
		st, addrs, nodes, from := clusterWithKeys(t, keys)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var got error
		err := st.Watch(ctx, keys[:1], func(tx store.Tx) error {
			m := startMove(t, nodes, addrs, from, (from+1)%len(addrs), keys[0])
			if err := m.migrate(keys[0]); err != nil {
				t.Fatal(err)
			}
			if exec {
				_, got = tx.Exec(ctx, store.Cmd{Name: "MSET", Args: []any{keys[0], "2", keys[1], "2"}})
			} else {
				var rs []store.Reply
				rs, got = tx.Do(ctx, store.Cmd{Name: "MGET", Args: []any{keys[0], keys[1]}})
				if got == nil && rs[0].Err != nil {
					got = rs[0].Err
				}
			}
			return got
		})
		cancel()
		if !errors.Is(got, store.ErrTxAborted) {
			t.Errorf("exec=%v: a command on keys split by the migration (TRYAGAIN): %v (Watch: %v); want store.ErrTxAborted", exec, got, err)
		}
	}
}
