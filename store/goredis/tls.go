package goredis

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/quotagate/limiter/internal/sockpeek"
)

// TLSDialer returns a dialer for go-redis's Options.Dialer (or
// ClusterOptions.Dialer) that connects with TLS, as go-redis does when only
// TLSConfig is set, and lets the pool notice an idle TLS connection that the
// server has closed.
//
// go-redis checks an idle connection before it reuses it by looking at its
// socket, but not under TLS: over TLS, the first call after the server
// closed an idle connection (its timeout setting, a restart, a failover) is
// written to the dead connection and fails with store.ErrUnknownOutcome. A
// connection from TLSDialer shows go-redis the socket under TLS and reports
// any data waiting there (the server's close_notify) or a closed socket as
// unusable, so the pool dials a new one and the call succeeds. Its one cost:
// an idle connection with anything unread on it is replaced rather than
// read, so RESP3 push messages to an idle connection are dropped with it.
//
// nd may be nil (go-redis's default: a 5 s connect timeout). The TLS
// handshake is bounded by nd's Timeout and by ctx.
//
//	rdb := redis.NewClient(&redis.Options{
//		Addr:   addr,
//		Dialer: goredis.TLSDialer(&net.Dialer{Timeout: time.Second}, tlsConfig),
//	})
func TLSDialer(nd *net.Dialer, cfg *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if nd == nil {
		nd = &net.Dialer{Timeout: defaultDialTimeout}
	}
	td := &tls.Dialer{NetDialer: nd, Config: cfg}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := td.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := c.(*tls.Conn)
		p := sockpeek.New(tc.NetConn())
		if p == nil {
			return tc, nil
		}
		return &tlsConn{Conn: tc, p: p}, nil
	}
}

// defaultDialTimeout is go-redis's DialTimeout default.
const defaultDialTimeout = 5 * time.Second

// tlsConn is a TLS connection whose socket go-redis's pool can check.
type tlsConn struct {
	*tls.Conn
	p *sockpeek.Peeker
}

// SyscallConn gives go-redis's idle-connection check a socket whose Read
// looks at the socket under TLS itself: it reports a connection that is
// closed or has data waiting as unusable, and a healthy one without
// calling the check's own function, which would otherwise try to read a
// waiting TLS record as a RESP3 push.
func (c *tlsConn) SyscallConn() (syscall.RawConn, error) { return checkedRaw{c}, nil }

// checkedRaw is the syscall.RawConn of a tlsConn.
type checkedRaw struct{ c *tlsConn }

func (r checkedRaw) raw() (syscall.RawConn, error) {
	sc, ok := r.c.NetConn().(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("goredis: %T has no socket", r.c.NetConn())
	}
	return sc.SyscallConn()
}

// Read peeks at the idle socket. go-redis calls it only from its check of
// an idle connection.
func (r checkedRaw) Read(func(fd uintptr) bool) error {
	if err := r.c.p.Peek(); err != nil {
		return fmt.Errorf("goredis: idle TLS connection unusable: %w", err)
	}
	return nil
}

// Control runs f on the socket under TLS.
func (r checkedRaw) Control(f func(fd uintptr)) error {
	rc, err := r.raw()
	if err != nil {
		return err
	}
	return rc.Control(f)
}

// Write runs f on the socket under TLS.
func (r checkedRaw) Write(f func(fd uintptr) bool) error {
	rc, err := r.raw()
	if err != nil {
		return err
	}
	return rc.Write(f)
}
