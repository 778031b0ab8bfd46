package limitergin_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/extra/limitergin"
	"github.com/quotagate/limiter/httplimit"
	"github.com/quotagate/limiter/rules"
)

// TestUnroutedBehindServeMuxKeepsMuxPattern: "A request routed nowhere
// keeps that one [the Pattern a ServeMux in front set], or gets
// httplimit.NoRoute": behind mux.Handle("/", app) an unrouted request is
// decided under the rules of "/", not the Default.
func TestUnroutedBehindServeMuxKeepsMuxPattern(t *testing.T) {
	gin.SetMode(gin.TestMode)
	m := byRoute(t, newLimiter(t), &rules.Set{
		Default:  rules.LimitUnknown(limiter.PerMinute(100).Named("default")),
		Subjects: map[string][]limiter.Limit{"/": {limiter.PerMinute(5).Named("catchall")}},
	})
	r := gin.New()
	r.Use(limitergin.Middleware(m))
	r.GET("/ok", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	mux := http.NewServeMux()
	mux.Handle("/", r)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/nowhere", nil))
	if got, want := rec.Header().Get(httplimit.HeaderPolicy), `"catchall";q=5;w=60`; got != want {
		t.Errorf("unrouted request behind a ServeMux: %d, RateLimit-Policy %q; want %q (the mux's pattern \"/\")", rec.Code, got, want)
	}
}
