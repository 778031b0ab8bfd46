package limiterecho_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/extra/limiterecho"
	"github.com/quotagate/limiter/httplimit"
	"github.com/quotagate/limiter/rules"
)

// TestPerRouteRules: as for limitergin, per-route rules
// (httplimit.WithRules(httplimit.Route())) through echo must decide the
// request under its route's rule.
func TestPerRouteRules(t *testing.T) {
	lim := newLimiter(t)
	rl, err := rules.New(context.Background(), lim, rules.Static(&rules.Set{
		Default:  rules.LimitUnknown(limiter.PerMinute(100)),
		Subjects: map[string][]limiter.Limit{"POST /login": {limiter.PerMinute(3).Named("login")}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(rl, httplimit.WithRules(httplimit.Route()))
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	e.POST("/login", func(c echo.Context) error { return c.String(http.StatusOK, "ok") }, limiterecho.Middleware(mw))
	for i := 1; i <= 4; i++ {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/login", nil)
		req.RemoteAddr = "192.0.2.1:1234"
		e.ServeHTTP(rec, req)
		want := http.StatusOK
		if i == 4 {
			want = http.StatusTooManyRequests
		}
		if rec.Code != want || rec.Header().Get("RateLimit-Policy") != `"login";q=3;w=60` {
			t.Errorf("POST /login %d through echo with per-route rules: %d %q, RateLimit-Policy %q; want %d under rule login (3 per minute)", i, rec.Code, rec.Body.String(), rec.Header().Get("RateLimit-Policy"), want)
		}
	}
}

// TestUnroutedRequest: as for limitergin, a request echo routes nowhere
// is decided under the rule set's Default (1 per minute) and answered by
// echo: 404, then 429 (it got 400, "no route pattern").
func TestUnroutedRequest(t *testing.T) {
	rl, err := rules.New(context.Background(), newLimiter(t), rules.Static(&rules.Set{
		Default:  rules.LimitUnknown(limiter.PerMinute(1)),
		Subjects: map[string][]limiter.Limit{"POST /login": {limiter.PerMinute(3).Named("login")}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(rl, httplimit.WithRules(httplimit.Route()))
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	e.Use(limiterecho.Middleware(mw))
	e.POST("/login", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	for i, want := range []int{http.StatusNotFound, http.StatusTooManyRequests} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/no-such-page", nil)
		req.RemoteAddr = "192.0.2.1:1234"
		e.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("GET /no-such-page %d: %d %q; want %d", i+1, rec.Code, rec.Body.String(), want)
		}
	}
}
