package limiterprom_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/extra/limiterprom"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// TestScrape decides through a Limiter with the observer, then scrapes the
// registry over HTTP as Prometheus would: 2 admitted and 1 denied by
// "login", 1 admitted by FailOpen with Redis gone (a degraded decision and
// a backend error), and 4 calls timed.
func TestScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	obs, err := limiterprom.New(reg, limiterprom.WithStrategy("fixed_window"))
	if err != nil {
		t.Fatal(err)
	}
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	defer rdb.Close()
	lim, err := limiter.New(goredis.New(rdb), strategy.NewFixedWindow(), limiter.WithObserver(obs), limiter.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l := limiter.PerMinute(2).Named("login")
	for i := range 3 {
		if r, err := lim.Allow(ctx, "u", l); err != nil || r.Allowed != (i < 2) {
			t.Fatalf("call %d: %+v, %v", i, r, err)
		}
	}
	open, err := lim.With(limiter.WithFailMode(limiter.FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if r, err := open.Allow(ctx, "u", l); err != nil || !r.Allowed || !r.Degraded {
		t.Fatalf("FailOpen with Redis gone: %+v, %v", r, err)
	}

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	text := string(body)
	for _, want := range []string{
		`limiter_decisions_total{outcome="allowed",rule="login",strategy="fixed_window"} 2`,
		`limiter_decisions_total{outcome="denied",rule="login",strategy="fixed_window"} 1`,
		`limiter_decisions_total{outcome="degraded_allowed",rule="login",strategy="fixed_window"} 1`,
		`limiter_errors_total{kind="backend",strategy="fixed_window"} 1`,
		`limiter_decision_duration_seconds_count{strategy="fixed_window"} 4`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("scrape lacks %q:\n%s", want, text)
		}
	}
	// A metric of the same name that is not the Observer's is refused.
	other := prometheus.NewRegistry()
	other.MustRegister(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "limiter_decisions_total", Help: "another's"}, []string{"x"}))
	if _, err := limiterprom.New(other); err == nil {
		t.Errorf("registering over another collector of the same name succeeded")
	}
}
