package limitergin_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/extra/limitergin"
	"github.com/quotagate/limiter/rules"
)

// TestPerRouteRules: the package doc promises "the same keys, rules
// ... as the net/http middleware", and the README's per-route rule sets are
// httplimit.New(rl, httplimit.WithRules(httplimit.Route())). Under gin, a
// request to a route the rule set names must be decided under that
// route's rule, not refused.
func TestPerRouteRules(t *testing.T) {
	gin.SetMode(gin.TestMode)
	lim := newLimiter(t)
	m := byRoute(t, lim, &rules.Set{
		Default:  rules.LimitUnknown(limiter.PerMinute(100)),
		Subjects: map[string][]limiter.Limit{"POST /login": {limiter.PerMinute(3).Named("login")}},
	})
	r := gin.New()
	r.POST("/login", limitergin.Middleware(m), func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	srv := httptest.NewServer(r)
	defer srv.Close()
	for i := 1; i <= 4; i++ {
		resp, err := srv.Client().Post(srv.URL+"/login", "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		want := http.StatusOK
		if i == 4 {
			want = http.StatusTooManyRequests
		}
		if resp.StatusCode != want || resp.Header.Get("RateLimit-Policy") != `"login";q=3;w=60` {
			t.Errorf("POST /login %d through gin with per-route rules: %d %q, RateLimit-Policy %q; want %d under rule login (3 per minute)", i, resp.StatusCode, body, resp.Header.Get("RateLimit-Policy"), want)
		}
	}
}

// TestUnroutedRequest: with the middleware on the whole engine and
// per-route rules, a request gin routes nowhere is decided under the rule
// set's Default (here 1 per minute, one budget for all of a client's
// unrouted requests, httplimit.NoRoute, whatever their method) and
// answered by gin: 404, then 429 (it got 400, "no route pattern"; and each
// method, a client's choice, had a budget of its own).
func TestUnroutedRequest(t *testing.T) {
	gin.SetMode(gin.TestMode)
	m := byRoute(t, newLimiter(t), &rules.Set{
		Default:  rules.LimitUnknown(limiter.PerMinute(1)),
		Subjects: map[string][]limiter.Limit{"POST /login": {limiter.PerMinute(3).Named("login")}},
	})
	r := gin.New()
	r.Use(limitergin.Middleware(m))
	r.POST("/login", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	for i, tc := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/no-such-page", http.StatusNotFound},
		{http.MethodGet, "/no-such-page", http.StatusTooManyRequests},
		{"X1", "/no-such-page", http.StatusTooManyRequests},
		{http.MethodDelete, "/other", http.StatusTooManyRequests},
	} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != tc.want {
			t.Errorf("request %d, %s %s: %d %q; want %d", i+1, tc.method, tc.path, rec.Code, rec.Body.String(), tc.want)
		}
	}
}
