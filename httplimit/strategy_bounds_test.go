package httplimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/httplimit"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/strategy"
)

// TestNewFixedRefusesALimitTheStrategyCannotHold: NewFixed validates its
// limits with rules.Set.Validate, which ignores the strategy's own bounds.
// A 30 000/day limit on a SlidingLog limiter (max 10 000 per window) is
// accepted, and then every request is answered 503 "the rate limiter cannot
// decide" - even with FailOpen, since ErrInvalidLimit bypasses the fail
// mode - and logged as an outage.
func TestNewFixedRefusesALimitTheStrategyCannotHold(t *testing.T) {
	m := redistest.NewMini(t)
	lim, err := limiter.New(dial(t, m.Addr()), strategy.NewSlidingLog(), limiter.WithFailMode(limiter.FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.NewFixed(lim, "api", []limiter.Limit{limiter.PerDay(30_000).Named("qpd")}, httplimit.WithLogger(nil))
	t.Logf("NewFixed: err=%v", err)
	if err == nil {
		rec := httptest.NewRecorder()
		mw.Handler(ok).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		t.Logf("request: %d %q", rec.Code, rec.Body.String())
		if rec.Code != http.StatusOK {
			t.Errorf("NewFixed accepted the limit, then a request under FailOpen got %d; want NewFixed to fail with limiter.ErrInvalidLimit", rec.Code)
		}
		return
	}
	if !errors.Is(err, limiter.ErrInvalidLimit) {
		t.Errorf("NewFixed: %v; want limiter.ErrInvalidLimit", err)
	}
}
