package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/httplimit"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/strategy"
)

// TestDeniedResetMatchesRetryAfter: on a response with both Retry-After
// and RateLimit, the reset parameter t SHOULD reference the same point in
// time as Retry-After (draft-ietf-httpapi-ratelimit-headers, Server
// Behavior; since -10 t is "the number of seconds until additional quota
// ... is made available"). A GCRA denial of a 10/min rule can be retried
// in 6 s, not 60.
func TestDeniedResetMatchesRetryAfter(t *testing.T) {
	lim, err := limiter.New(dial(t, redistest.NewMini(t).Addr()), strategy.NewGCRA())
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.NewFixed(lim, "api", []limiter.Limit{limiter.PerMinute(10).Named("qpm")})
	if err != nil {
		t.Fatal(err)
	}
	var rec *httptest.ResponseRecorder
	for range 11 {
		rec = httptest.NewRecorder()
		mw.Handler(ok).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	}
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("11th request: %d; want 429", rec.Code)
	}
	retry := rec.Header().Get("Retry-After")
	rl := rec.Header().Get("RateLimit")
	if !strings.HasSuffix(rl, ";t="+retry) || rec.Header().Get("X-RateLimit-Reset") != retry {
		t.Errorf("Retry-After %s but RateLimit %q, X-RateLimit-Reset %s; want t = Retry-After", retry, rl, rec.Header().Get("X-RateLimit-Reset"))
	}
}
