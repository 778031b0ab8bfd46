package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/httplimit"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/strategy"
)

// TestBurstHeadersConsistent: a burst above the Rate is advertised as the
// quota q (the Rate) until less than that is left, so that r never exceeds
// q, nor X-RateLimit-Remaining X-RateLimit-Limit.
func TestBurstHeadersConsistent(t *testing.T) {
	lim, err := limiter.New(dial(t, redistest.NewMini(t).Addr()), strategy.NewGCRA()) // the server's clock stands still
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.ParseYAML([]byte("default: [{name: qps, rate: 10, period: 1s, burst: 50}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	rl, err := rules.New(context.Background(), lim, rules.Static(set))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(rl)
	if err != nil {
		t.Fatal(err)
	}
	// remaining after each request: 49 … 0 of the burst of 50; full again
	// 100 ms per unit taken later
	for i := 1; i <= 50; i++ {
		rec := httptest.NewRecorder()
		mw.Handler(ok).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		h := rec.Header()
		want := strconv.Itoa(min(50-i, 10))
		if rec.Code != http.StatusOK || h.Get("X-RateLimit-Limit") != "10" || h.Get("X-RateLimit-Remaining") != want ||
			h.Get("RateLimit") != `"qps";r=`+want+`;t=`+strconv.Itoa((i+9)/10) || h.Get("RateLimit-Policy") != `"qps";q=10;w=1` {
			t.Fatalf("request %d: %d, Policy %s, RateLimit %s, X-RateLimit-Limit %s, X-RateLimit-Remaining %s; want 200, r=%s, limit 10",
				i, rec.Code, h.Get("RateLimit-Policy"), h.Get("RateLimit"), h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), want)
		}
	}
}
