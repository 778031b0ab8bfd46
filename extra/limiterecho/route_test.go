package limiterecho_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
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
	mw := loginRule(t, 100)
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

// TestUnroutedRequest: with the middleware on the whole engine, or on a
// group, and per-route rules, a request echo routes nowhere (404, and 405:
// a route at the path for another method) is decided under the rule set's
// Default (here 1 per minute, one budget for all of a client's unrouted
// requests, httplimit.NoRoute, whatever their method) and answered by
// echo: 404, then 429 (it got 400, "no route pattern"). A 405 was decided
// under its method and path, a 404 in a group under the group's catch-all
// "/api/*", and each method (a client's choice) had a budget of its own.
func TestUnroutedRequest(t *testing.T) {
	mw := loginRule(t, 1)
	var seen []string
	spy := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			err := next(c)
			seen = append(seen, c.Request().Method+" "+c.Request().URL.Path+" "+strconv.Itoa(c.Response().Status))
			return err
		}
	}
	e := echo.New()
	e.Use(spy, limiterecho.Middleware(mw))
	e.POST("/login", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	grouped := echo.New()
	g := grouped.Group("/api", spy, limiterecho.Middleware(mw))
	g.POST("/login", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	for i, tc := range []struct {
		e            *echo.Echo
		method, path string
		client       string
		want         int
	}{
		{e, http.MethodGet, "/no-such-page", "192.0.2.1", http.StatusNotFound},
		{e, http.MethodGet, "/no-such-page", "192.0.2.1", http.StatusTooManyRequests},
		{e, "X1", "/no-such-page", "192.0.2.1", http.StatusTooManyRequests},
		{e, http.MethodDelete, "/other", "192.0.2.1", http.StatusTooManyRequests},
		{e, http.MethodGet, "/login", "192.0.2.1", http.StatusTooManyRequests}, // 405
		{e, http.MethodGet, "/login", "192.0.2.2", http.StatusMethodNotAllowed},
		{e, http.MethodGet, "/login", "192.0.2.2", http.StatusTooManyRequests},
		{grouped, http.MethodGet, "/api/no-such-page", "192.0.2.3", http.StatusNotFound},
		{grouped, http.MethodPut, "/api/elsewhere", "192.0.2.3", http.StatusTooManyRequests},
		{grouped, http.MethodPost, "/api/login", "192.0.2.3", http.StatusOK},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(tc.method, tc.path, nil)
		req.RemoteAddr = tc.client + ":1234"
		tc.e.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("request %d, %s %s from %s: %d %q; want %d (so far: %q)", i+1, tc.method, tc.path, tc.client, rec.Code, rec.Body.String(), tc.want, seen)
		}
	}
}

// TestRoutesEchoFindsLater: per-route rules apply to a route on a virtual
// host (Echo.Host, whose routes are not among Echo.Routes), and to a route
// added after requests were served, at a path that already had a route
// for another method: each was decided as unrouted, under the Default.
func TestRoutesEchoFindsLater(t *testing.T) {
	ok := func(c echo.Context) error { return c.String(http.StatusOK, "ok") }
	call := func(e *echo.Echo, method, url string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(method, url, nil)
		req.RemoteAddr = "192.0.2.1:1234"
		e.ServeHTTP(rec, req)
		return rec
	}
	const login = `"login";q=3;w=60`

	hosted := echo.New()
	hosted.GET("/login", ok)
	hosted.Host("api.example.com").POST("/login", ok, limiterecho.Middleware(loginRule(t, 100)))
	for i := 1; i <= 4; i++ {
		rec := call(hosted, http.MethodPost, "http://api.example.com/login")
		want := http.StatusOK
		if i == 4 {
			want = http.StatusTooManyRequests
		}
		if rec.Code != want || rec.Header().Get("RateLimit-Policy") != login {
			t.Errorf("POST /login %d on a virtual host's route: %d, RateLimit-Policy %q; want %d under rule login", i, rec.Code, rec.Header().Get("RateLimit-Policy"), want)
		}
	}

	later := echo.New()
	later.Use(limiterecho.Middleware(loginRule(t, 100)))
	later.GET("/login", ok)
	if rec := call(later, http.MethodGet, "/login"); rec.Code != http.StatusOK {
		t.Fatalf("GET /login: %d", rec.Code)
	}
	if rec := call(later, http.MethodPost, "/login"); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /login before its route: %d; want 405", rec.Code)
	}
	later.POST("/login", ok)
	if rec := call(later, http.MethodPost, "/login"); rec.Code != http.StatusOK || rec.Header().Get("RateLimit-Policy") != login {
		t.Errorf("POST /login, its route added after a GET /login was served: %d, RateLimit-Policy %q; want 200 under rule login", rec.Code, rec.Header().Get("RateLimit-Policy"))
	}
}

// loginRule is a middleware of per-route rules on a limiter of its own: 3
// per minute for the route "POST /login", perMinute for the others (the
// Default).
func loginRule(t *testing.T, perMinute int64) *httplimit.Middleware {
	t.Helper()
	mw := byRoute(t, newLimiter(t), &rules.Set{
		Default:  rules.LimitUnknown(limiter.PerMinute(perMinute)),
		Subjects: map[string][]limiter.Limit{"POST /login": {limiter.PerMinute(3).Named("login")}},
	})
	return mw
}
