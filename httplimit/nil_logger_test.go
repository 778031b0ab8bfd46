package httplimit_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/httplimit"
	"github.com/quotagate/limiter/internal/redistest"
)

// TestWithLoggerNilLogsNothing: WithLogger(nil) "logs nothing", not to
// slog.Default().
func TestWithLoggerNilLogsNothing(t *testing.T) {
	logs := new(logRecords)
	prev := slog.Default()
	slog.SetDefault(slog.New(logs))
	t.Cleanup(func() { slog.SetDefault(prev) })

	p := redistest.NewProxy(t, redistest.NewMini(t).Addr())
	lim := newLimiter(t, dial(t, p.Addr()), limiter.WithFailMode(limiter.FailOpen))
	mw, err := httplimit.NewFixed(lim, "api", []limiter.Limit{limiter.PerMinute(100)}, httplimit.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Close() // Redis unreachable: FailOpen admits, Degraded
	rec := httptest.NewRecorder()
	mw.Handler(ok).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if len(logs.attrs()) != 0 {
		t.Errorf("WithLogger(nil) logged %v (%d)", logs.attrs(), rec.Code)
	}
}
