package httplimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/httplimit"
	"github.com/quotagate/limiter/limitertest"
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/strategy"
)

// TestLegacyLimitIsBindingRule: with 10/s listed before 2/day, the
// day's rule binds (least left), and X-RateLimit-Limit is its quota, 2,
// not the first rule's 10, as RateLimit names it; the 429 is not cacheable.
func TestLegacyLimitIsBindingRule(t *testing.T) {
	qps, qpd := limiter.PerSecond(10).Named("qps"), limiter.PerDay(2).Named("qpd")
	lim, _ := limitertest.New(t, strategy.NewFixedWindow())
	rl, err := rules.New(context.Background(), lim, rules.Static(&rules.Set{Subjects: map[string][]limiter.Limit{"k": {qps, qpd}}}))
	if err != nil {
		t.Fatal(err)
	}
	mw, err := httplimit.New(rl, httplimit.WithKey(func(*http.Request) (string, error) { return "k", nil }))
	if err != nil {
		t.Fatal(err)
	}
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for i, want := range []struct {
		code                     int
		rateLimit, limit, remain string
	}{
		{200, `"qpd";r=1;t=86400`, "2", "1"},
		{200, `"qpd";r=0;t=86400`, "2", "0"},
		{429, `"qpd";r=0;t=86400`, "2", "0"},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		hd := w.Header()
		if w.Code != want.code || hd.Get(httplimit.HeaderRateLimit) != want.rateLimit ||
			hd.Get(httplimit.HeaderLimit) != want.limit || hd.Get(httplimit.HeaderRemaining) != want.remain {
			t.Errorf("request %d: %d, RateLimit %q, X-RateLimit-Limit %q, X-RateLimit-Remaining %q; want %d, %q, %q, %q",
				i+1, w.Code, hd.Get(httplimit.HeaderRateLimit), hd.Get(httplimit.HeaderLimit), hd.Get(httplimit.HeaderRemaining),
				want.code, want.rateLimit, want.limit, want.remain)
		}
		if want.code == http.StatusTooManyRequests && hd.Get("Cache-Control") != "no-store" {
			t.Errorf("request %d: 429 with Cache-Control %q; want no-store", i+1, hd.Get("Cache-Control"))
		}
	}
}

// TestClientIPZoneDroppedWithPort: an X-Forwarded-For entry with a
// zone and a port is keyed without the zone, as one without a port is: a
// client behind a trusted proxy cannot get fresh counters by varying the
// zone it writes.
func TestClientIPZoneDroppedWithPort(t *testing.T) {
	k := httplimit.ClientIP(netip.MustParsePrefix("10.0.0.0/8"))
	for _, xff := range []string{"[fe80::1%eth0]:443", "[fe80::1%x1]:1", "fe80::1%eth0", "[fe80::1]:80"} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "10.0.0.1:1234"
		r.Header.Set("X-Forwarded-For", xff)
		got, err := k(r)
		if err != nil || got != "fe80::1" {
			t.Errorf("X-Forwarded-For %q: key %q, %v; want fe80::1", xff, got, err)
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "[fe80::2%eth1]:80"
	if got, err := httplimit.ClientIP()(r); err != nil || got != "fe80::2" {
		t.Errorf("RemoteAddr %q: key %q, %v; want fe80::2", r.RemoteAddr, got, err)
	}
}

// TestScopeVisibleASCII: NewFixed refuses a scope that is not
// visible ASCII: a control character (DEL, 0x7f, included), a space, a
// byte above '~'.
func TestScopeVisibleASCII(t *testing.T) {
	lim, _ := limitertest.New(t, strategy.NewFixedWindow())
	limits := []limiter.Limit{limiter.PerMinute(2).Named("qpm")}
	for _, scope := range []string{"a\x7fb", "\x7f", "a b", "a\tb", "é", ""} {
		if _, err := httplimit.NewFixed(lim, scope, limits); !errors.Is(err, limiter.ErrInvalidOption) {
			t.Errorf("NewFixed scope %q: %v; want ErrInvalidOption", scope, err)
		}
	}
	if _, err := httplimit.NewFixed(lim, "api~v1", limits); err != nil {
		t.Errorf("NewFixed scope %q: %v; want accepted", "api~v1", err)
	}
}
