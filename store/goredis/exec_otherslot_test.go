package goredis_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// A transaction's command on a key of another slot than the watched
// keys' is refused by the node: an error of the call, not
// store.ErrTxAborted (nothing watched changed; a caller that retries on
// ErrTxAborted would loop for ever), and nothing runs.
func TestExecOnAnotherSlotIsNotTxAborted(t *testing.T) {
	c := redistest.StartCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	st := goredis.New(rdb)
	ctx := context.Background()
	watched := "x{a}"
	wm, err := rdb.MasterForKey(ctx, watched)
	if err != nil {
		t.Fatal(err)
	}
	var other string
	for i := 0; ; i++ {
		other = fmt.Sprintf("x{b%d}", i)
		m, err := rdb.MasterForKey(ctx, other)
		if err != nil {
			t.Fatal(err)
		}
		if m.Options().Addr != wm.Options().Addr {
			break
		}
	}
	for attempt := range 3 { // what a caller retrying on ErrTxAborted sees
		var execErr error
		err := st.Watch(ctx, []string{watched}, func(tx store.Tx) error {
			_, execErr = tx.Exec(ctx, store.Cmd{Name: "INCR", Args: []any{watched}}, store.Cmd{Name: "INCR", Args: []any{other}})
			return execErr
		})
		if errors.Is(err, store.ErrTxAborted) || errors.Is(execErr, store.ErrTxAborted) {
			t.Errorf("attempt %d: Exec naming %s (another node's slot) while %s is watched: %v; want an error that is not ErrTxAborted (nothing watched changed, watching again changes nothing)", attempt, other, watched, execErr)
		}
	}
	for _, k := range []string{watched, other} {
		if n, err := rdb.Exists(ctx, k).Result(); err != nil || n != 0 {
			t.Errorf("%s exists: %d %v", k, n, err)
		}
	}
}
