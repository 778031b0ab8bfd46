package httplimit

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

type suppressedRecorder struct {
	mu  sync.Mutex
	got []int64
}

func (h *suppressedRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *suppressedRecorder) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "suppressed" {
			h.mu.Lock()
			h.got = append(h.got, a.Value.Int64())
			h.mu.Unlock()
		}
		return true
	})
	return nil
}
func (h *suppressedRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *suppressedRecorder) WithGroup(string) slog.Handler      { return h }

// TestLogSuppressedSincePreviousLine: a line counts the requests left
// unlogged since the previous line (WithLogger), not since the start.
func TestLogSuppressedSincePreviousLine(t *testing.T) {
	h := new(suppressedRecorder)
	ll := newLogLimiter(slog.New(h))
	r := httptest.NewRequest("GET", "/x", nil)
	err := errors.New("redis down")
	burst := func(n int) {
		for range n {
			ll.report(r, "", err, false)
		}
		ll.mu.Lock()
		ll.last = time.Now().Add(-LogInterval - time.Second) // the interval passes
		ll.mu.Unlock()
	}
	burst(3) // one line, two suppressed
	burst(2) // one line (suppressed 2), one suppressed
	burst(1) // one line (suppressed 1)
	want := []int64{0, 2, 1}
	if len(h.got) != len(want) || h.got[0] != want[0] || h.got[1] != want[1] || h.got[2] != want[2] {
		t.Errorf("suppressed counts %v; want %v", h.got, want)
	}
}
