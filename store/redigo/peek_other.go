//go:build !unix

package redigo

import "net"

// peeker cannot look at a socket without blocking here: every idle
// connection passes.
type peeker struct{}

func newPeeker(net.Conn) *peeker { return nil }

func (*peeker) peek() error { return nil }
