package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/quotagate/limiter"
)

// TestClientGoneDegradedIsNotLogged: under FailOpen and FailClosed a client
// that hung up before its request was decided is not logged either (WithLogger:
// "A request whose client went away (its context canceled) is not logged"),
// so the one line per LogInterval is left for the outage that follows.
func TestClientGoneDegradedIsNotLogged(t *testing.T) {
	for _, mode := range []limiter.FailMode{limiter.FailOpen, limiter.FailClosed} {
		h, p, logs := loggedThroughProxy(t, mode)
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // the client hung up
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/gone", nil).WithContext(ctx))
		_ = p.Close() // now Redis really is unreachable
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/outage", nil))
		logged := false
		for _, l := range logs.attrs() {
			if l["path"] == "/gone" {
				t.Errorf("%v: a canceled client was logged: %v", mode, l)
			}
			logged = logged || l["path"] == "/outage"
		}
		if !logged {
			t.Errorf("%v: the outage was not logged; lines %v", mode, logs.attrs())
		}
	}
}
