package redigo

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/quotagate/limiter/internal/sockpeek"
)

// Dial connects to the Redis server at address like redis.DialContext(ctx,
// network, address, options...), but makes the network connection itself
// with nd, so that TestOnBorrow can later tell, without a round trip,
// whether the server has closed it. A nil nd is redigo's default dialer: a
// 30 s connect timeout and a 5 min keep-alive. ctx bounds the connect too.
//
// Set the connect timeout and keep-alive on nd: the options DialConnectTimeout
// and DialKeepAlive configure redigo's own dialer, which Dial replaces. An
// option that dials (DialNetDial, DialContextFunc) takes precedence over nd;
// the connection then works as usual but TestOnBorrow cannot check it.
func Dial(ctx context.Context, nd *net.Dialer, network, address string, options ...redis.DialOption) (redis.Conn, error) {
	if nd == nil {
		nd = &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 5 * time.Minute}
	}
	var nc net.Conn
	capture := redis.DialContextFunc(func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := nd.DialContext(ctx, network, addr)
		nc = c
		return c, err
	})
	c, err := redis.DialContext(ctx, network, address, append([]redis.DialOption{capture}, options...)...)
	if err != nil || nc == nil {
		return c, err
	}
	return &conn{Conn: c, p: sockpeek.New(nc)}, nil
}

// TestOnBorrow is a redis.Pool TestOnBorrow for connections made by Dial: it
// looks at the idle connection's socket without blocking and rejects it
// when the server has closed it (a restart, a failover, the server's idle
// timeout) or when unread data waits on it. The pool then discards it and
// tries another, or dials, before the caller writes anything, so that the
// first call after a restart does not fail with store.ErrUnknownOutcome.
// It costs one non-blocking read system call, no round trip. Over TLS any
// record waiting (a close_notify, a late session ticket) also replaces the
// connection, which is safe and costs a dial. Connections not made by Dial,
// and platforms other than Unix, pass unchecked.
func TestOnBorrow(c redis.Conn, _ time.Time) error {
	if cc, ok := c.(*conn); ok {
		if err := cc.p.Peek(); err != nil {
			return fmt.Errorf("redigo: idle connection unusable: %w", err)
		}
	}
	return nil
}

// conn is a connection made by Dial: redigo's, with its socket at hand for
// TestOnBorrow. It keeps redigo's optional interfaces, which
// the pool and the Store use for deadlines.
type conn struct {
	redis.Conn
	p *sockpeek.Peeker
}

var (
	_ redis.ConnWithContext = (*conn)(nil)
	_ redis.ConnWithTimeout = (*conn)(nil)
)

func (c *conn) DoContext(ctx context.Context, cmd string, args ...any) (any, error) {
	return redis.DoContext(c.Conn, ctx, cmd, args...)
}

func (c *conn) ReceiveContext(ctx context.Context) (any, error) {
	return redis.ReceiveContext(c.Conn, ctx)
}

func (c *conn) DoWithTimeout(d time.Duration, cmd string, args ...any) (any, error) {
	return redis.DoWithTimeout(c.Conn, d, cmd, args...)
}

func (c *conn) ReceiveWithTimeout(d time.Duration) (any, error) {
	return redis.ReceiveWithTimeout(c.Conn, d)
}
