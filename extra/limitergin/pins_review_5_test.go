package limitergin_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/extra/limitergin"
	"github.com/quotagate/limiter/rules"
)

// TestParamRouteRules: a route with a parameter is decided under its
// route's rule ("GET /users/:id", as the doc names it), one budget for the
// route per client, not one per parameter value, nor the Default's.
func TestParamRouteRules(t *testing.T) {
	gin.SetMode(gin.TestMode)
	m := byRoute(t, newLimiter(t), &rules.Set{
		Default:  rules.LimitUnknown(limiter.PerMinute(100).Named("default")),
		Subjects: map[string][]limiter.Limit{"GET /users/:id": {limiter.PerMinute(2).Named("user")}},
	})
	r := gin.New()
	r.GET("/users/:id", limitergin.Middleware(m), func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	for i, tc := range []struct {
		path string
		want int
	}{{"/users/1", http.StatusOK}, {"/users/2", http.StatusOK}, {"/users/3", http.StatusTooManyRequests}} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if got := rec.Header().Get("RateLimit-Policy"); rec.Code != tc.want || got != `"user";q=2;w=60` {
			t.Errorf("request %d, GET %s: %d, RateLimit-Policy %q; want %d under rule user", i+1, tc.path, rec.Code, got, tc.want)
		}
	}
}

// TestRootRouteRules: the route "/" is a route like any other: its rule
// applies, not the Default's.
func TestRootRouteRules(t *testing.T) {
	gin.SetMode(gin.TestMode)
	m := byRoute(t, newLimiter(t), &rules.Set{
		Default:  rules.LimitUnknown(limiter.PerMinute(100).Named("default")),
		Subjects: map[string][]limiter.Limit{"GET /": {limiter.PerMinute(1).Named("home")}},
	})
	r := gin.New()
	r.Use(limitergin.Middleware(m))
	r.GET("/", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		if got := rec.Header().Get("RateLimit-Policy"); rec.Code != want || got != `"home";q=1;w=60` {
			t.Errorf("request %d, GET /: %d, RateLimit-Policy %q; want %d under rule home", i+1, rec.Code, got, want)
		}
	}
}
