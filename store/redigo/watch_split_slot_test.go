package redigo_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mna/redisc"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/redigo"
)

// watch.go: a WATCH refused with TRYAGAIN (the watched keys split by a
// slot's migration) ran nothing and is sent again after a pause, until
// the migration has moved the rest: the Watch then goes on.
func TestWatchWaitsForASplitSlot(t *testing.T) {
	cl := redistest.StartCluster(t)
	addrs := cl.Addrs()
	st := redigo.New(redigo.Cluster(newCluster(t, addrs)))
	k1, k2 := "{s}a", "{s}b"
	finish := splitSlot(t, addrs, k1, k2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(200 * time.Millisecond)
		finish()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	called := false
	err := st.Watch(ctx, []string{k1, k2}, func(tx store.Tx) error {
		called = true
		_, err := tx.Do(ctx, store.Cmd{Name: "MGET", Args: []any{k1, k2}})
		return err
	})
	<-done
	if err != nil || !called {
		t.Errorf("Watch of keys split by a migration that ends 200 ms later = %v (fn called: %v); want it to wait and go on", err, called)
	}
}

// splitSlot sets k1 and k2 (keys of one slot) on the slot's owner and
// starts moving the slot to the next node, k1 moved and k2 not: the keys
// are split until the returned finish moves k2 and gives every node the
// slot's new owner.
func splitSlot(t *testing.T, addrs []string, k1, k2 string) (finish func()) {
	t.Helper()
	from := owner(t, addrs, k1)
	to := (from + 1) % len(addrs)
	node(t, addrs[from], "MSET", k1, "1", k2, "1")
	slot := redisc.Slot(k1)
	id := ids(t, addrs)
	host, port, _ := strings.Cut(addrs[to], ":")
	node(t, addrs[to], "CLUSTER", "SETSLOT", slot, "IMPORTING", id[from])
	node(t, addrs[from], "CLUSTER", "SETSLOT", slot, "MIGRATING", id[to])
	node(t, addrs[from], "MIGRATE", host, port, "", 0, 5000, "KEYS", k1)
	return func() {
		node(t, addrs[from], "MIGRATE", host, port, "", 0, 5000, "KEYS", k2)
		for _, a := range addrs {
			node(t, a, "CLUSTER", "SETSLOT", slot, "NODE", id[to])
		}
	}
}
