package limiterecho_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/quotagate/limiter/extra/limiterecho"
)

// TestPerRouteRulesBehindServeMux: an app mounted on an http.ServeMux
// (mux.Handle("/", app), beside "/metrics") gets requests whose Pattern the
// mux set ("/"); the framework's route must still name the rules. It did
// not: a login rule of 3/min never applied, every route fell to the
// Default and shared one counter per client.
func TestPerRouteRulesBehindServeMux(t *testing.T) {
	mw := loginRule(t, 100)
	e := echo.New()
	e.POST("/login", func(c echo.Context) error { return c.String(http.StatusOK, "ok") }, limiterecho.Middleware(mw))
	mux := http.NewServeMux()
	mux.Handle("/", e)
	for i := 1; i <= 4; i++ {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/login", nil)
		mux.ServeHTTP(rec, req)
		want := http.StatusOK
		if i == 4 {
			want = http.StatusTooManyRequests
		}
		if rec.Code != want || rec.Header().Get("RateLimit-Policy") != `"login";q=3;w=60` {
			t.Errorf("POST /login %d, echo behind a ServeMux: %d, RateLimit-Policy %q; want %d under rule login", i, rec.Code, rec.Header().Get("RateLimit-Policy"), want)
		}
	}
}
