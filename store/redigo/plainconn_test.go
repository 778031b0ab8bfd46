package redigo_test

import (
	"context"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/redigo"
)

// plainConn is a connection wrapper of the usual kind (tracing, metrics):
// it embeds redis.Conn, so it has neither redis.ConnWithContext nor
// redis.ConnWithTimeout.
type plainConn struct{ redis.Conn }

// TestPlainConnWithDeadline: on a *redis.Pool whose connections have
// neither optional interface, calls with a deadline work as without one
// (bounded by the connection's own read timeout). The pool's activeConn
// has DoWithTimeout and ReceiveWithTimeout, which refuse such a connection
// before writing or reading; the Store reported that refusal as
// store.ErrUnknownOutcome, and a pipeline failed after it had run.
func TestPlainConnWithDeadline(t *testing.T) {
	srv := redistest.StartServer(t)
	p := &redis.Pool{
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			c, err := redis.DialContext(ctx, "tcp", srv.Addr(), redis.DialReadTimeout(time.Second))
			if err != nil {
				return nil, err
			}
			return plainConn{c}, nil
		},
		MaxActive: 2, MaxIdle: 2, Wait: true,
	}
	t.Cleanup(func() { _ = p.Close() })
	st := redigo.New(p)
	if _, err := st.Do(context.Background(), store.Cmd{Name: "SET", Args: []any{"n", 0}}); err != nil {
		t.Fatalf("without a deadline: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if rs, err := st.Do(ctx, store.Cmd{Name: "INCR", Args: []any{"n"}}); err != nil {
		t.Errorf("INCR with a 2s deadline = %v, %v; want 1", rs, err)
	}
	if rs, err := st.Do(ctx, store.Cmd{Name: "INCR", Args: []any{"n"}}, store.Cmd{Name: "GET", Args: []any{"n"}}); err != nil {
		v, _ := redis.String(node(t, srv.Addr(), "GET", "n"), nil)
		t.Errorf("pipeline INCR, GET with a 2s deadline = %v, %v (n is now %s on the server)", rs, err, v)
	}
}
