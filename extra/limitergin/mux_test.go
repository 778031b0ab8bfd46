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

// TestPerRouteRulesBehindServeMux: an app mounted on an http.ServeMux
// (mux.Handle("/", app), beside "/metrics") gets requests whose Pattern the
// mux set ("/"); the framework's route must still name the rules. It did
// not: a login rule of 3/min never applied, every route fell to the
// Default and shared one counter per client.
func TestPerRouteRulesBehindServeMux(t *testing.T) {
	gin.SetMode(gin.TestMode)
	lim := newLimiter(t)
	m := byRoute(t, lim, &rules.Set{
		Default:  rules.LimitUnknown(limiter.PerMinute(100)),
		Subjects: map[string][]limiter.Limit{"POST /login": {limiter.PerMinute(3).Named("login")}},
	})
	r := gin.New()
	r.POST("/login", limitergin.Middleware(m), func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	mux := http.NewServeMux()
	mux.Handle("/", r)
	mux.Handle("/healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	for i := 1; i <= 4; i++ {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/login", nil)
		mux.ServeHTTP(rec, req)
		want := http.StatusOK
		if i == 4 {
			want = http.StatusTooManyRequests
		}
		if rec.Code != want || rec.Header().Get("RateLimit-Policy") != `"login";q=3;w=60` {
			t.Errorf("POST /login %d, gin behind a ServeMux: %d, RateLimit-Policy %q; want %d under rule login", i, rec.Code, rec.Header().Get("RateLimit-Policy"), want)
		}
	}
}
