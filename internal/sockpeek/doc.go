// Package sockpeek looks at an idle connection's socket without blocking,
// so that a connection pool can tell, before it writes a command, that the
// server has closed the connection (an idle timeout, a restart, a failover)
// or that unread data waits on it. It works under a TLS connection too: a
// TLS record waiting on an idle connection (most often the server's
// close_notify) makes the connection unusable all the same.
package sockpeek

import "errors"

// ErrUnsolicited is data waiting on an idle connection: a reply nobody will
// read, or a server's goodbye. Either way the connection is not reused.
var ErrUnsolicited = errors.New("data waiting on an idle connection")
