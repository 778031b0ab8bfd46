package limitergin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/extra/limitergin"
	"github.com/quotagate/limiter/httplimit"
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

func newLimiter(t *testing.T) *limiter.Limiter {
	t.Helper()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	lim, err := limiter.New(goredis.New(rdb), strategy.NewFixedWindow())
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// byRoute returns a Middleware that decides each request under set's rules
// for its route (httplimit.WithRules(httplimit.Route())), counted on lim.
func byRoute(t *testing.T, lim *limiter.Limiter, set *rules.Set) *httplimit.Middleware {
	t.Helper()
	rl, err := rules.New(context.Background(), lim, rules.Static(set))
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(rl, httplimit.WithRules(httplimit.Route()))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMiddleware serves a gin engine on a loopback listener: /login allows
// 2 a minute per client, /search 5; the two routes count apart, a denied
// request gets 429 with the RateLimit fields and never reaches the
// handler.
func TestMiddleware(t *testing.T) {
	gin.SetMode(gin.TestMode)
	lim := newLimiter(t)
	login, err := httplimit.NewFixed(lim, "login", []limiter.Limit{limiter.PerMinute(2)})
	if err != nil {
		t.Fatal(err)
	}
	search, err := httplimit.NewFixed(lim, "search", []limiter.Limit{limiter.PerMinute(5)})
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]int{}
	r := gin.New()
	r.POST("/login", limitergin.Middleware(login), func(c *gin.Context) { served["login"]++; c.String(http.StatusOK, "ok") })
	r.GET("/search", limitergin.Middleware(search), func(c *gin.Context) { served["search"]++; c.String(http.StatusOK, "ok") })
	srv := httptest.NewServer(r)
	defer srv.Close()

	do := func(method, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), method, srv.URL+path, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp
	}
	for i := range 3 {
		if resp := do(http.MethodGet, "/search"); resp.StatusCode != http.StatusOK {
			t.Fatalf("search %d: %s", i, resp.Status)
		}
	}
	for i := range 2 {
		resp := do(http.MethodPost, "/login")
		if resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit") == "" {
			t.Fatalf("login %d after 3 searches: %s, RateLimit %q; want 200 (the routes count apart)", i, resp.Status, resp.Header.Get("RateLimit"))
		}
	}
	resp := do(http.MethodPost, "/login")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("third login: %s, Retry-After %q; want 429 with Retry-After", resp.Status, resp.Header.Get("Retry-After"))
	}
	if served["login"] != 2 || served["search"] != 3 {
		t.Errorf("handlers served %v; want login 2, search 3", served)
	}
}
