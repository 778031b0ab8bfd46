package rueidis_test

import (
	"testing"

	"github.com/quotagate/limiter/internal/adaptertest"
	"github.com/quotagate/limiter/internal/redistest"
)

// TestBusyServer: while another client's script holds the server (BUSY
// replies), every strategy's call fails with an error naming BUSY and the
// process does not crash (rueidis v1.0.79 panics when a dedicated
// connection is handed back during BUSY; the adapter closes it instead);
// once the script is killed, calls succeed again.
func TestBusyServer(t *testing.T) {
	s := redistest.StartServer(t)
	adaptertest.Busy(t, newStore(t, s.Addr(), nil), s.Addr())
}

// TestIdleClosed: after the server closes idle connections, the next call
// of every strategy succeeds, over TCP and over TLS.
func TestIdleClosed(t *testing.T) { adaptertest.IdleClosed(t, dial, dialTLS) }

// TestUnreachable: a refused connection and an untrusted certificate are
// errors that keep their cause and are not unknown outcomes.
func TestUnreachable(t *testing.T) { adaptertest.Unreachable(t, dial, dialTLS) }
