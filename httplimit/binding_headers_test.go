package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/httplimit"
	"github.com/quotagate/limiter/limitertest"
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/strategy"
)

// TestBindingRuleOfEquals: 1/s and 1/day, in either order, both used up by
// the first request: its RateLimit names the daily rule, whose reset the
// client must wait for (it named the rule listed first: "qps";r=0;t=1,
// and a client that came back after that second was refused for a day).
func TestBindingRuleOfEquals(t *testing.T) {
	qps, qpd := limiter.PerSecond(1).Named("qps"), limiter.PerDay(1).Named("qpd")
	for _, limits := range [][]limiter.Limit{{qps, qpd}, {qpd, qps}} {
		lim, clock := limitertest.New(t, strategy.NewFixedWindow())
		rl, err := rules.New(context.Background(), lim, rules.Static(&rules.Set{Subjects: map[string][]limiter.Limit{"k": limits}}))
		if err != nil {
			t.Fatal(err)
		}
		mw, err := httplimit.New(rl, httplimit.WithKey(func(*http.Request) (string, error) { return "k", nil }))
		if err != nil {
			t.Fatal(err)
		}
		h := mw.Handler(ok)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		if got, want := w.Header().Get(httplimit.HeaderRateLimit), `"qpd";r=0;t=86400`; w.Code != http.StatusOK || got != want {
			t.Errorf("rules %v: first request %d, RateLimit %q; want 200 and %q", limits, w.Code, got, want)
		}
		if got := w.Header().Get(httplimit.HeaderReset); got != "86400" {
			t.Errorf("rules %v: X-RateLimit-Reset %q; want 86400", limits, got)
		}
		clock.Advance(1100 * time.Millisecond)
		w = httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "86399" {
			t.Errorf("rules %v: a second later %d, Retry-After %q; want 429 and 86399", limits, w.Code, w.Header().Get("Retry-After"))
		}
	}
}
