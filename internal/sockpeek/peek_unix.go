//go:build unix

package sockpeek

import (
	"errors"
	"io"
	"net"
	"syscall"
)

// Peeker looks at an idle connection's socket without blocking. It is made
// once per connection, so that a check allocates nothing; a pool checks a
// connection only while it holds it idle, never concurrently.
type Peeker struct {
	rc   syscall.RawConn
	read func(fd uintptr) bool // p.readFD, bound once
	n    int
	err  error
	buf  [1]byte
}

// New returns a Peeker for nc's socket, or nil when nc has none (a nil
// Peeker's Peek always passes). nc is the network connection itself, not a
// TLS connection on it.
func New(nc net.Conn) *Peeker {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	p := &Peeker{rc: rc}
	p.read = p.readFD
	return p
}

func (p *Peeker) readFD(fd uintptr) bool {
	p.n, _, p.err = syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return true // never wait for readiness
}

// Peek reports whether the idle connection is closed by its peer (io.EOF),
// failed, or has unread data (ErrUnsolicited); nil when a read would block,
// the healthy state of an idle connection. It peeks (MSG_PEEK) at one byte
// and consumes nothing, so a connection checked while a reply is arriving
// is not corrupted, only replaced.
func (p *Peeker) Peek() error {
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
	return ErrUnsolicited
}
