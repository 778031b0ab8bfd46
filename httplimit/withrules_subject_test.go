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

// TestWithRulesSubjectEscaped: under WithRules a request is counted under
// its rule subject and its key "joined by a space (escaped as Join does)":
// route "POST /login" and key "k 1" give "POST%20/login k%201", so that no
// other (route, key) pair can name the same counters.
func TestWithRulesSubjectEscaped(t *testing.T) {
	m := redistest.NewMini(t)
	lim := newLimiter(t, dial(t, m.Addr()))
	set := &rules.Set{
		Subjects: map[string][]limiter.Limit{"POST /login": {limiter.PerMinute(2).Named("login")}},
		Default:  rules.AllowUnknown(),
	}
	rl, err := rules.New(context.Background(), lim, rules.Static(set))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(rl, httplimit.WithRules(httplimit.Route()), httplimit.WithKey(httplimit.Header("X-Key")))
	if err != nil {
		t.Fatal(err)
	}
	var subject string
	mux := http.NewServeMux()
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		d, _ := mw.Decide(w, r)
		subject = d.Subject
	})
	r := httptest.NewRequest(http.MethodPost, "/login", nil)
	r.Header.Set("X-Key", "k 1")
	mux.ServeHTTP(httptest.NewRecorder(), r)
	if want := "POST%20/login k%201"; subject != want {
		t.Errorf("subject %q; want %q", subject, want)
	}
}
