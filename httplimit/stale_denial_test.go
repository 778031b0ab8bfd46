package httplimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/httplimit"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/internal/sfv"
	"github.com/quotagate/limiter/internal/storetest"
	"github.com/quotagate/limiter/strategy"
)

// TestStaleWindowDenialIsNotQuotaExceeded: a denial Redis made because the
// round trip was as long as the window (Bucketed, whose every command
// reaches the server a window late: strategy.ErrStaleWindow), counting
// nothing, is not a rule's refusal: 503 with the reduced-capacity problem
// type, no violated policy, a Retry-After, and rate limit fields that show
// the whole quota left (3 of 3), as it is.
func TestStaleWindowDenialIsNotQuotaExceeded(t *testing.T) {
	m := redistest.NewMini(t)
	var causes []error
	lim, err := limiter.New(storetest.Moving(dial(t, m.Addr()), m.Advance, time.Second), strategy.NewBucketed(strategy.WithClock(m.Now)),
		limiter.WithObserver(limiter.ObserverFuncs{Decision: func(_ context.Context, _ string, r limiter.Result) {
			if r.Cause != nil {
				causes = append(causes, r.Cause)
			}
		}}))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.NewFixed(lim, "api", []limiter.Limit{{Rate: 3, Period: time.Second, Name: "qps"}},
		httplimit.WithKey(httplimit.Header("X-Key")))
	if err != nil {
		t.Fatal(err)
	}
	h := mw.Handler(ok)
	for i := range 3 {
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("X-Key", "k")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if len(causes) != i+1 || !errors.Is(causes[i], strategy.ErrStaleWindow) {
			t.Fatalf("request %d: %d, causes %v; want a denial whose Cause is ErrStaleWindow (the test's premise)", i, rec.Code, causes)
		}
		var p struct {
			Type     string    `json:"type"`
			Status   int       `json:"status"`
			Violated *[]string `json:"violated-policies"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
			t.Fatalf("request %d: body %q: %v", i, rec.Body, err)
		}
		if rec.Code != 503 || p.Status != 503 || p.Type != httplimit.ProblemReducedCapacity || p.Violated != nil {
			t.Errorf("request %d: %d %s; want 503, %s, no violated-policies", i, rec.Code, rec.Body, httplimit.ProblemReducedCapacity)
		}
		if ra := rec.Header().Get("Retry-After"); ra != "1" {
			t.Errorf("request %d: Retry-After %q; want 1", i, ra)
		}
		ls, err := sfv.ParseRateLimit(rec.Header().Get("RateLimit"))
		if err != nil || len(ls) != 1 || ls[0].R != 3 || rec.Header().Get("X-RateLimit-Remaining") != "3" {
			t.Errorf("request %d: RateLimit %q (%v), X-RateLimit-Remaining %q; want r=3 and 3: nothing was counted", i, rec.Header().Get("RateLimit"), err, rec.Header().Get("X-RateLimit-Remaining"))
		}
	}
}
