package redigo_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/redigo"
)

// A transaction's command on a key of another slot than the watched
// keys' is refused by the node: an error of the call, not
// store.ErrTxAborted (nothing watched changed; a caller that retries on
// ErrTxAborted would loop for ever), and nothing runs.
func TestExecOnAnotherSlotIsNotTxAborted(t *testing.T) {
	cl := redistest.StartCluster(t)
	c := newCluster(t, cl.Addrs())
	st := redigo.New(redigo.Cluster(c))
	ctx := context.Background()
	owner := func(key string) string {
		conn := c.Get()
		defer conn.Close()
		if err := redisc.BindConn(conn, key); err != nil {
			t.Fatal(err)
		}
		addr, _ := redis.String(conn.Do("CLUSTER", "MYID"))
		return addr
	}
	watched := "x{a}"
	var other string
	for i := 0; ; i++ {
		other = fmt.Sprintf("x{b%d}", i)
		if owner(other) != owner(watched) {
			break
		}
	}
	for attempt := range 3 {
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
		rs, err := st.Do(ctx, store.Cmd{Name: "EXISTS", Args: []any{k}})
		if err != nil || rs[0].Val != int64(0) {
			t.Errorf("%s exists: %v %v", k, rs, err)
		}
	}
}
