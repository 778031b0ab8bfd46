package redigo_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/redigo"
)

// TestExecMultiRefused: a MULTI the server refuses (an ACL without it)
// lets the queued commands run one by one, outside any transaction: Exec
// must report an unknown outcome, not a plain refusal as if nothing ran,
// and the connection must not go back to the pool still watching.
func TestExecMultiRefused(t *testing.T) {
	srv := redistest.StartServer(t)
	node(t, srv.Addr(), "ACL", "SETUSER", "lim", "on", ">pw", "~*", "&*", "+@all", "-multi")
	nd := &net.Dialer{Timeout: time.Second}
	p := &redis.Pool{
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redigo.Dial(ctx, nd, "tcp", srv.Addr(), redis.DialUsername("lim"), redis.DialPassword("pw"))
		},
		MaxActive: 1, MaxIdle: 1, Wait: true,
	}
	t.Cleanup(func() { _ = p.Close() })
	st := redigo.New(p)
	ctx := context.Background()
	err := st.Watch(ctx, []string{"k"}, func(tx store.Tx) error {
		_, err := tx.Exec(ctx, store.Cmd{Name: "INCR", Args: []any{"n"}})
		return err
	})
	n, _ := redis.Int(node(t, srv.Addr(), "GET", "n"), nil)
	if err == nil || (n == 1 && !errors.Is(err, store.ErrUnknownOutcome)) {
		t.Errorf("Exec with MULTI refused = %v; the INCR ran (n=%d) outside the transaction, yet the error is not an unknown outcome", err, n)
	}
}
