//go:build unix

package redigo

import (
	"errors"
	"io"
	"net"
	"syscall"
)

// peeker looks at an idle connection's socket without blocking. It is made
// once per connection, so that a check allocates nothing; the pool checks
// a connection only while it holds it idle, never concurrently.
type peeker struct {
	rc   syscall.RawConn
	read func(fd uintptr) bool // p.readFD, bound once
	n    int
	err  error
	buf  [1]byte
}

// newPeeker returns a peeker for nc, or nil when nc has no socket.
func newPeeker(nc net.Conn) *peeker {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	p := &peeker{rc: rc}
	p.read = p.readFD
	return p
}

func (p *peeker) readFD(fd uintptr) bool {
	p.n, p.err = syscall.Read(int(fd), p.buf[:])
	return true // never wait for readiness
}

// peek reports whether the idle connection is closed by its peer (io.EOF),
// failed, or has unread data; nil when a read would block, the healthy
// state of an idle connection. As go-redis does, it reads one byte from
// the non-blocking socket: a connection with data is discarded anyway.
func (p *peeker) peek() error {
	if p == nil {
		return nil
	}
	if err := p.rc.Read(p.read); err != nil {
		return err
	}
	switch {
	case errors.Is(p.err, syscall.EAGAIN) || errors.Is(p.err, syscall.EWOULDBLOCK):
		return nil
	case p.err != nil:
		return p.err
	case p.n == 0:
		return io.EOF
	}
	return errUnsolicited
}
