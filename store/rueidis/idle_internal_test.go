package rueidis

import (
	"sync"
	"testing"
	"time"

	rd "github.com/redis/rueidis"
)

// closeRecorder is a dedicated connection that records when it was closed.
type closeRecorder struct {
	rd.DedicatedClient // (nil: only Close is called)
	mu                 sync.Mutex
	closedAt           time.Time
}

func (c *closeRecorder) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closedAt = time.Now()
}

func (c *closeRecorder) closed() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closedAt
}

// TestIdleConnsClosedWhenUnused: a kept connection is closed once it has
// been unused for idleFor, though no Watch comes to meet it (a quiet
// service, a Cluster node that no longer serves the Watches' keys), and
// not before; the sweep comes back for one kept later, and stops when
// none is left. (Before, one was closed only when the next Watch met it:
// never, when none came.)
func TestIdleConnsClosedWhenUnused(t *testing.T) {
	const keep = 100 * time.Millisecond
	p := &idleConns{max: 4, keep: keep}
	var parked [3]time.Time
	conns := [3]*closeRecorder{{}, {}, {}}
	for i, c := range conns {
		parked[i] = time.Now()
		p.park(c, func() {})
		if i == 0 {
			time.Sleep(keep / 2) // the others are kept later than the first
		}
	}
	deadline := time.Now().Add(10 * time.Second) // a loaded machine's timers run late
	for i, c := range conns {
		for c.closed().IsZero() {
			if time.Now().After(deadline) {
				t.Fatalf("connection %d (of 3) kept unused for %v is still open; want it closed after %v", i, time.Since(parked[i]), keep)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if d := c.closed().Sub(parked[i]); d < keep {
			t.Errorf("connection %d closed after %v unused; want at least %v", i, d, keep)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.conns) != 0 || p.sweep != nil {
		t.Errorf("after every connection was closed: %d kept, sweep running %v; want none, no sweep", len(p.conns), p.sweep != nil)
	}
}
