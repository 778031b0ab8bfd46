package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/httplimit"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/rules"
)

func withRules(t *testing.T, addr string, opts ...httplimit.Option) *http.ServeMux {
	set := &rules.Set{Subjects: map[string][]limiter.Limit{"POST /login": {limiter.PerMinute(2).Named("login")}}}
	rl, err := rules.New(context.Background(), newLimiter(t, dial(t, addr)), rules.Static(set)) // FailError
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(rl, append(opts, httplimit.WithRules(httplimit.Route()), httplimit.WithLogger(nil))...)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /login", mw.Handler(ok))
	return mux
}

func TestWithRulesRedisDownIs503(t *testing.T) {
	p := redistest.NewProxy(t, redistest.NewMini(t).Addr())
	mux := withRules(t, p.Addr())
	_ = p.Close() // Redis unreachable
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/login", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("Redis down, FailError: %d %v %s; want 503", rec.Code, rec.Header(), rec.Body)
	}
}

func TestWithRulesEmptyKeyIs400(t *testing.T) {
	m := redistest.NewMini(t)
	mux := withRules(t, m.Addr(), httplimit.WithKey(func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil }))
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/login", nil))
	if rec.Code != http.StatusBadRequest || len(m.Keys()) != 0 {
		t.Errorf("empty key: %d, keys %q; want 400, nothing written", rec.Code, m.Keys())
	}
}
