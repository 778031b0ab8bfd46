package redigo_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/gomodule/redigo/redis"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/redigo"
)

// TestArgumentsNotKeptAfterReturn: a store keeps none of the slices it is
// given once a call returns (the store.Store contract: callers reuse
// them). redigo's DoContext writes a command on a goroutine of its own,
// which outlives a call whose context ends first, and a shared pipeline
// writes a call its caller may have given up on: what reaches them must
// be the store's own, not the caller's argument slice or []byte. The
// caller's were handed on, for Do and for EvalSha (the race detector saw
// redigo's goroutine read a reused buffer after the call had returned).
func TestArgumentsNotKeptAfterReturn(t *testing.T) {
	m := redistest.NewMini(t)
	var mu sync.Mutex
	var seen [][]any // the arguments each command was handed to redigo with
	nd := &net.Dialer{Timeout: time.Second}
	p := &redis.Pool{
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			c, err := redigo.Dial(ctx, nd, "tcp", m.Addr())
			if err != nil {
				return nil, err
			}
			return recordingConn{c, &mu, &seen}, nil
		},
		MaxActive: 2, MaxIdle: 2, Wait: true,
	}
	t.Cleanup(func() { _ = p.Close() })
	st := redigo.New(p)
	buf := []byte("value")
	args := []any{"k", buf}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := st.Do(ctx, store.Cmd{Name: "SET", Args: args}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.EvalSha(ctx, "0123456789012345678901234567890123456789", []string{"k"}, args[1:]); err == nil {
		t.Fatal("EVALSHA of an unknown script: no error")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 2 {
		t.Fatalf("%d commands seen; want the SET and the EVALSHA", len(seen))
	}
	for _, a := range seen {
		if len(a) > 0 && unsafe.SliceData(a) == unsafe.SliceData(args) {
			t.Errorf("%v: redigo was handed the caller's argument slice", a)
		}
		for _, v := range a {
			if b, ok := v.([]byte); ok && unsafe.SliceData(b) == unsafe.SliceData(buf) {
				t.Errorf("%v: redigo was handed the caller's []byte", a)
			}
		}
	}
}

// recordingConn records the arguments of each command handed to it.
type recordingConn struct {
	redis.Conn
	mu   *sync.Mutex
	seen *[][]any
}

func (c recordingConn) record(cmd string, args []any) {
	if cmd == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	*c.seen = append(*c.seen, args)
}

func (c recordingConn) Do(cmd string, args ...any) (any, error) {
	c.record(cmd, args)
	return c.Conn.Do(cmd, args...)
}

func (c recordingConn) Send(cmd string, args ...any) error {
	c.record(cmd, args)
	return c.Conn.Send(cmd, args...)
}

func (c recordingConn) DoContext(ctx context.Context, cmd string, args ...any) (any, error) {
	c.record(cmd, args)
	return c.Conn.(redis.ConnWithContext).DoContext(ctx, cmd, args...)
}

func (c recordingConn) ReceiveContext(ctx context.Context) (any, error) {
	return c.Conn.(redis.ConnWithContext).ReceiveContext(ctx)
}

func (c recordingConn) ReceiveWithTimeout(d time.Duration) (any, error) {
	return c.Conn.(redis.ConnWithTimeout).ReceiveWithTimeout(d)
}

func (c recordingConn) DoWithTimeout(d time.Duration, cmd string, args ...any) (any, error) {
	c.record(cmd, args)
	return c.Conn.(redis.ConnWithTimeout).DoWithTimeout(d, cmd, args...)
}
