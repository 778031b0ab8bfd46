package redigo_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mna/redisc"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/redigo"
)

// doc.go: "a transaction refused because the keys' slot moved since the
// WATCH (MOVED, ASK or TRYAGAIN for its commands) ran nothing and is
// store.ErrTxAborted". store.Tx: a read refused with TRYAGAIN likewise.
func TestWatchTryAgainIsTxAborted(t *testing.T) {
	for _, exec := range []bool{true, false} {
		cl := redistest.StartCluster(t)
		addrs := cl.Addrs()
		st := redigo.New(redigo.Cluster(newCluster(t, addrs)))
		ctx := context.Background()
		k1, k2 := "{w}a", "{w}b"
		from := owner(t, addrs, k1)
		to := (from + 1) % len(addrs)
		node(t, addrs[from], "MSET", k1, "1", k2, "1")
		slot := redisc.Slot(k1)
		id := ids(t, addrs)
		var got error
		err := st.Watch(ctx, []string{k1}, func(tx store.Tx) error {
			// the slot starts migrating and k1 moves; k2 stays behind
			node(t, addrs[to], "CLUSTER", "SETSLOT", slot, "IMPORTING", id[from])
			node(t, addrs[from], "CLUSTER", "SETSLOT", slot, "MIGRATING", id[to])
			host, port, _ := strings.Cut(addrs[to], ":")
			node(t, addrs[from], "MIGRATE", host, port, "", 0, 5000, "KEYS", k1)
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
		if !errors.Is(got, store.ErrTxAborted) {
			t.Errorf("exec=%v: %s split by the migration (TRYAGAIN): %v (Watch: %v); want store.ErrTxAborted", exec, "MSET/MGET", got, err)
		}
	}
}
