package goredis_test

import (
	"context"
	"testing"

	"github.com/quotagate/limiter/internal/adaptertest"
	"github.com/quotagate/limiter/internal/redistest"
)

// TestBusyServer: while another client's script holds the server, every
// strategy's call fails with an error naming BUSY; afterwards all work.
func TestBusyServer(t *testing.T) {
	s := redistest.StartServer(t)
	st, closeFn, err := dial(context.Background(), s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeFn)
	adaptertest.Busy(t, st, s.Addr())
}

// TestIdleClosed: after the server closes idle connections, the next call
// of every strategy succeeds, over TCP and over TLS.
func TestIdleClosed(t *testing.T) { adaptertest.IdleClosed(t, dial, dialTLS) }

// TestUnreachable: a refused connection and an untrusted certificate are
// errors that keep their cause and are not unknown outcomes.
func TestUnreachable(t *testing.T) { adaptertest.Unreachable(t, dial, dialTLS) }
