package httplimit_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/httplimit"
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// Rules per app key: two per second and a thousand per day for app-42; a
// third request in the same second gets 429 with the draft's fields.
func ExampleNew() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	defer rdb.Close()
	lim, _ := limiter.New(goredis.New(rdb), strategy.NewFixedWindow())
	rl, _ := rules.New(context.Background(), lim, rules.Static(&rules.Set{
		Subjects: map[string][]limiter.Limit{
			"app-42": {limiter.PerSecond(2).Named("qps"), limiter.PerDay(1000).Named("qpd")},
		},
	}))
	mw, err := httplimit.New(rl, httplimit.WithKey(httplimit.Header("X-App-Key")))
	if err != nil {
		panic(err)
	}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	srv := httptest.NewServer(mw.Handler(hello))
	defer srv.Close()

	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		req.Header.Set("X-App-Key", "app-42")
		resp, err := srv.Client().Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(resp.Status)
		fmt.Println("  RateLimit-Policy:", resp.Header.Get("RateLimit-Policy"))
		fmt.Println("  RateLimit:", resp.Header.Get("RateLimit"))
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			fmt.Println("  Retry-After:", ra)
		}
	}
	// Output:
	// 200 OK
	//   RateLimit-Policy: "qps";q=2;w=1, "qpd";q=1000;w=86400
	//   RateLimit: "qps";r=1;t=1
	// 200 OK
	//   RateLimit-Policy: "qps";q=2;w=1, "qpd";q=1000;w=86400
	//   RateLimit: "qps";r=0;t=1
	// 429 Too Many Requests
	//   RateLimit-Policy: "qps";q=2;w=1, "qpd";q=1000;w=86400
	//   RateLimit: "qps";r=0;t=1
	//   Retry-After: 1
}

// Fixed limits for every client IP, no rule set needed.
func ExampleNewFixed() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	defer rdb.Close()
	lim, _ := limiter.New(goredis.New(rdb), strategy.NewFixedWindow())
	mw, err := httplimit.NewFixed(lim, "api", []limiter.Limit{limiter.PerMinute(1).Named("per-minute")})
	if err != nil {
		panic(err)
	}
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for i := 0; i < 2; i++ {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil)) // from 192.0.2.1
		fmt.Printf("%d remaining=%s retry-after=%q body=%s\n", w.Code, w.Header().Get("X-RateLimit-Remaining"),
			w.Header().Get("Retry-After"), strings.TrimSpace(w.Body.String()))
	}
	// Output:
	// 200 remaining=0 retry-after="" body=
	// 429 remaining=0 retry-after="60" body={"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Too Many Requests","status":429,"violated-policies":["per-minute"]}
}
