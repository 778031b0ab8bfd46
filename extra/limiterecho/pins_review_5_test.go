package limiterecho_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/extra/limiterecho"
	"github.com/quotagate/limiter/rules"
)

// TestParamRouteRules: a route with a parameter is decided under its
// route's rule ("GET /users/:id", as the doc names it), one budget for the
// route per client, not one per parameter value, nor the Default's.
func TestParamRouteRules(t *testing.T) {
	m := byRoute(t, newLimiter(t), &rules.Set{
		Default:  rules.LimitUnknown(limiter.PerMinute(100).Named("default")),
		Subjects: map[string][]limiter.Limit{"GET /users/:id": {limiter.PerMinute(2).Named("user")}},
	})
	e := echo.New()
	e.GET("/users/:id", func(c echo.Context) error { return c.String(http.StatusOK, "ok") }, limiterecho.Middleware(m))
	for i, tc := range []struct {
		path string
		want int
	}{{"/users/1", http.StatusOK}, {"/users/2", http.StatusOK}, {"/users/3", http.StatusTooManyRequests}} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, tc.path, nil)
		req.RemoteAddr = "192.0.2.1:1234"
		e.ServeHTTP(rec, req)
		if got := rec.Header().Get("RateLimit-Policy"); rec.Code != tc.want || got != `"user";q=2;w=60` {
			t.Errorf("request %d, GET %s: %d, RateLimit-Policy %q; want %d under rule user", i+1, tc.path, rec.Code, got, tc.want)
		}
	}
}

// TestRootRouteRules: the route "/" is a route like any other: its rule
// applies, not the Default's.
func TestRootRouteRules(t *testing.T) {
	m := byRoute(t, newLimiter(t), &rules.Set{
		Default:  rules.LimitUnknown(limiter.PerMinute(100).Named("default")),
		Subjects: map[string][]limiter.Limit{"GET /": {limiter.PerMinute(1).Named("home")}},
	})
	e := echo.New()
	e.Use(limiterecho.Middleware(m))
	e.GET("/", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = "192.0.2.1:1234"
		e.ServeHTTP(rec, req)
		if got := rec.Header().Get("RateLimit-Policy"); rec.Code != want || got != `"home";q=1;w=60` {
			t.Errorf("request %d, GET /: %d, RateLimit-Policy %q; want %d under rule home", i+1, rec.Code, got, want)
		}
	}
}
