package redistest

import (
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// Mini is a miniredis server whose TIME and key expiry move together.
// Its clock only moves through Advance.
type Mini struct {
	*miniredis.Miniredis

	clock sync.Mutex
	now   time.Time
}

// NewMini starts a Mini for a test and closes it when the test ends.
func NewMini(t testing.TB) *Mini {
	t.Helper()
	m, err := StartMini()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// StartMini starts a Mini; the caller must call Close.
// The clock starts at the current wall-clock second.
func StartMini() (*Mini, error) {
	m := &Mini{Miniredis: miniredis.NewMiniRedis(), now: time.Now().Truncate(time.Second)}
	m.SetTime(m.now)
	if err := m.Start(); err != nil {
		return nil, err
	}
	return m, nil
}

// Now returns the server's current time.
func (m *Mini) Now() time.Time {
	m.clock.Lock()
	defer m.clock.Unlock()
	return m.now
}

// Advance moves the server clock forward by d: TIME (SetTime) and key
// expiry (FastForward) move by the same amount. It is safe for concurrent use.
func (m *Mini) Advance(d time.Duration) {
	m.clock.Lock()
	defer m.clock.Unlock()
	m.now = m.now.Add(d)
	m.SetTime(m.now)
	m.FastForward(d)
}
