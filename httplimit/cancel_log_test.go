package httplimit_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/httplimit"
	"github.com/quotagate/limiter/internal/redistest"
)

// loggedThroughProxy returns a FixedWindow Middleware in fail mode (no
// WithTimeout) whose Redis is reached through p, logging to logs.
func loggedThroughProxy(t *testing.T, mode limiter.FailMode) (h http.Handler, p *redistest.Proxy, logs *logRecords) {
	m := redistest.NewMini(t)
	p = redistest.NewProxy(t, m.Addr())
	lim := newLimiter(t, dial(t, p.Addr()), limiter.WithFailMode(mode))
	if _, err := lim.Allow(context.Background(), "warm", limiter.PerMinute(100)); err != nil {
		t.Fatal(err)
	}
	logs = new(logRecords)
	mw, err := httplimit.NewFixed(lim, "api", []limiter.Limit{limiter.PerMinute(100).Named("qpm")}, httplimit.WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	return mw.Handler(ok), p, logs
}

// TestClientGoneIsNotAnOutage: a client that goes away before its request
// is decided (its context canceled) is not logged as a request the limiter
// could not decide: it used up the one line per LogInterval, and a real
// Redis outage right after went unlogged.
func TestClientGoneIsNotAnOutage(t *testing.T) {
	h, p, logs := loggedThroughProxy(t, limiter.FailError)

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

// TestServerDeadlineIsAnOutage: a deadline the server put on the request
// (a timeout middleware) that runs out while Redis does not answer is an
// outage, logged in every fail mode (it was taken for a client that went
// away: FailOpen served the requests and FailError answered 503, with no
// line logged).
func TestServerDeadlineIsAnOutage(t *testing.T) {
	for _, mode := range []limiter.FailMode{limiter.FailOpen, limiter.FailError} {
		h, p, logs := loggedThroughProxy(t, mode)
		p.Blackhole(true) // Redis stops answering
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/deadline", nil).WithContext(ctx))
		took := time.Since(start)
		cancel()
		p.Blackhole(false)
		t.Logf("%v: %d after %s; lines %v", mode, rec.Code, took.Round(time.Millisecond), logs.attrs())
		logged := false
		for _, l := range logs.attrs() {
			logged = logged || l["path"] == "/deadline"
		}
		if !logged {
			t.Errorf("%v: a request undecided at its server-set deadline (%d) was not logged; lines %v", mode, rec.Code, logs.attrs())
		}
	}
}
