package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/httplimit"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/rules"
)

// fixedMiddleware is a Middleware over NewFixed with 2 requests a minute
// ("qpm") per client IP on miniredis, and opts.
func fixedMiddleware(t *testing.T, opts ...httplimit.Option) *httplimit.Middleware {
	t.Helper()
	m := redistest.NewMini(t)
	lim := newLimiter(t, dial(t, m.Addr()))
	mw, err := httplimit.NewFixed(lim, "api", []limiter.Limit{limiter.PerMinute(2).Named("qpm")}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return mw
}

// serve sends a GET from client through mw to a handler that counts the
// requests it serves.
func serve(mw *httplimit.Middleware, client string, served *int) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = client + ":1234"
	w := httptest.NewRecorder()
	mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { *served++ })).ServeHTTP(w, r)
	return w
}

// TestLegacyHeaders: the X-RateLimit fields are written by default and not
// with WithLegacyHeaders(false); RateLimit-Policy and RateLimit are
// written either way, on an admitted request and on a denied one.
func TestLegacyHeaders(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []httplimit.Option
		legacy bool
	}{
		{"default", nil, true},
		{"on", []httplimit.Option{httplimit.WithLegacyHeaders(true)}, true},
		{"off", []httplimit.Option{httplimit.WithLegacyHeaders(false)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mw := fixedMiddleware(t, tc.opts...)
			served := 0
			for i, want := range []int{200, 200, 429} {
				w := serve(mw, "192.0.2.1", &served)
				if w.Code != want {
					t.Fatalf("request %d: %d, want %d", i, w.Code, want)
				}
				h := w.Result().Header
				if h.Get("RateLimit-Policy") == "" || h.Get("RateLimit") == "" {
					t.Errorf("request %d: RateLimit-Policy %q, RateLimit %q; want both", i, h.Get("RateLimit-Policy"), h.Get("RateLimit"))
				}
				wantRemaining := map[bool]string{true: fmt.Sprint(max(0, 1-i)), false: ""}[tc.legacy]
				wantLimit := map[bool]string{true: "2", false: ""}[tc.legacy]
				if got := h.Get("X-RateLimit-Remaining"); got != wantRemaining {
					t.Errorf("request %d: X-RateLimit-Remaining %q, want %q", i, got, wantRemaining)
				}
				if got := h.Get("X-RateLimit-Limit"); got != wantLimit {
					t.Errorf("request %d: X-RateLimit-Limit %q, want %q", i, got, wantLimit)
				}
				if got := h.Get("X-RateLimit-Reset"); (got != "") != tc.legacy {
					t.Errorf("request %d: X-RateLimit-Reset %q (legacy %v)", i, got, tc.legacy)
				}
			}
			if served != 2 {
				t.Errorf("next served %d requests, want 2", served)
			}
		})
	}
}

// TestErrorHandler: a request that cannot be decided (its key function
// fails) goes to the handler WithErrorHandler sets, with the key
// function's error, and not to next; the default answers it 400.
func TestErrorHandler(t *testing.T) {
	noKey := httplimit.WithKey(func(*http.Request) (string, error) {
		return "", fmt.Errorf("no user: %w", httplimit.ErrNoKey)
	})
	var got error
	mw := fixedMiddleware(t, noKey, httplimit.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
		got = err
		w.WriteHeader(http.StatusUnauthorized)
	}))
	served := 0
	w := serve(mw, "192.0.2.1", &served)
	if w.Code != http.StatusUnauthorized || !errors.Is(got, httplimit.ErrNoKey) || served != 0 {
		t.Errorf("handler set: %d, error %v, served %d; want 401 from the handler, ErrNoKey, 0 served", w.Code, got, served)
	}
	w = serve(fixedMiddleware(t, noKey), "192.0.2.1", &served)
	if w.Code != http.StatusBadRequest || served != 0 {
		t.Errorf("default: %d, served %d; want 400, 0 served", w.Code, served)
	}
}

// TestDeniedHandler: a denied request goes to the handler
// WithDeniedHandler sets, with the decision (the rule that denied it) and
// the rate limit fields already on the header; admitted ones do not.
func TestDeniedHandler(t *testing.T) {
	var denials []rules.Decision
	var fields []string
	mw := fixedMiddleware(t, httplimit.WithDeniedHandler(func(w http.ResponseWriter, r *http.Request, d rules.Decision) {
		denials = append(denials, d)
		fields = append(fields, w.Header().Get("RateLimit"))
		w.WriteHeader(http.StatusTeapot)
	}))
	served := 0
	codes := []int{}
	for range 3 {
		codes = append(codes, serve(mw, "192.0.2.1", &served).Code)
	}
	if fmt.Sprint(codes) != "[200 200 418]" || served != 2 {
		t.Fatalf("codes %v, served %d; want [200 200 418], 2 served", codes, served)
	}
	if len(denials) != 1 {
		t.Fatalf("denied handler called %d times, want 1", len(denials))
	}
	d := denials[0]
	if d.Allowed || d.RetryAfter <= 0 || d.Limit.Name != "qpm" || fields[0] == "" {
		t.Errorf("decision %+v (rule %q), RateLimit %q; want a denial by qpm with a RetryAfter, the field set", d, d.Limit.Name, fields[0])
	}
}

// TestNilOptions: a nil option, or an option given nil, is
// ErrInvalidOption from New and from NewFixed.
func TestNilOptions(t *testing.T) {
	m := redistest.NewMini(t)
	lim := newLimiter(t, dial(t, m.Addr()))
	rl, err := rules.New(context.Background(), lim, rules.Static(&rules.Set{Default: rules.AllowUnknown()}))
	if err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]httplimit.Option{
		"nil option":             nil,
		"WithKey(nil)":           httplimit.WithKey(nil),
		"WithRules(nil)":         httplimit.WithRules(nil),
		"WithErrorHandler(nil)":  httplimit.WithErrorHandler(nil),
		"WithDeniedHandler(nil)": httplimit.WithDeniedHandler(nil),
	} {
		if _, err := httplimit.New(rl, o); !errors.Is(err, limiter.ErrInvalidOption) {
			t.Errorf("New with %s: %v; want ErrInvalidOption", name, err)
		}
		if _, err := httplimit.NewFixed(lim, "api", []limiter.Limit{limiter.PerMinute(1)}, o); !errors.Is(err, limiter.ErrInvalidOption) {
			t.Errorf("NewFixed with %s: %v; want ErrInvalidOption", name, err)
		}
	}
}
