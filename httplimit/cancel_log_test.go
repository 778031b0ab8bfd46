package httplimit_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/httplimit"
	"github.com/quotagate/limiter/internal/redistest"
)

// TestClientGoneIsNotAnOutage: a client that goes away before its request
// is decided (its context canceled) is not logged as a request the limiter
// could not decide: it used up the one line per LogInterval, and a real
// Redis outage right after went unlogged.
func TestClientGoneIsNotAnOutage(t *testing.T) {
	m := redistest.NewMini(t)
	p := redistest.NewProxy(t, m.Addr())
	st := dial(t, p.Addr())
	lim := newLimiter(t, st) // FailError
	if _, err := lim.Allow(context.Background(), "warm", limiter.PerMinute(100)); err != nil {
		t.Fatal(err)
	}
	var logs logRecords
	mw, err := httplimit.NewFixed(lim, "api", []limiter.Limit{limiter.PerMinute(100).Named("qpm")}, httplimit.WithLogger(slog.New(&logs)))
	if err != nil {
		t.Fatal(err)
	}
	h := mw.Handler(ok)

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the client hung up
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/gone", nil).WithContext(ctx))
	t.Logf("canceled client: %d; log lines %v", rec.Code, logs.attrs())

	_ = p.Close() // now Redis really is unreachable
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/outage", nil))
	t.Logf("Redis down: %d; log lines %v", rec.Code, logs.attrs())
	logged := false
	for _, l := range logs.attrs() {
		if l["path"] == "/outage" {
			logged = true
		}
		if l["kind"] == "canceled" {
			t.Errorf("a client's own cancellation was logged as a request the limiter could not decide: %v", l)
		}
	}
	if !logged {
		t.Errorf("the Redis outage was not logged (suppressed by the line for the canceled client)")
	}
}
