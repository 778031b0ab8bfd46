package httplimit_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/httplimit"
	"github.com/quotagate/limiter/internal/redistest"
)

// TestClientIPEmptyXFFElements: empty list elements (RFC 9110 #rule: "a, ,
// b", a trailing comma) are no entries, not an unparsable address.
func TestClientIPEmptyXFFElements(t *testing.T) {
	k := httplimit.ClientIP(netip.MustParsePrefix("10.0.0.0/8"))
	for _, xff := range []string{"198.51.100.9,", "198.51.100.9, , 10.1.1.1", ",198.51.100.9"} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "10.0.0.2:1"
		r.Header.Set("X-Forwarded-For", xff)
		if got, err := k(r); err != nil || got != "198.51.100.9" {
			t.Errorf("XFF %q: %q, %v; want 198.51.100.9", xff, got, err)
		}
	}
}

// TestOutageLoggedAtDefaultLevel: a request Redis could not decide is
// logged by a logger at its default level (Info), as slog.Default() is.
func TestOutageLoggedAtDefaultLevel(t *testing.T) {
	var buf bytes.Buffer
	p := redistest.NewProxy(t, redistest.NewMini(t).Addr())
	lim := newLimiter(t, dial(t, p.Addr()), limiter.WithFailMode(limiter.FailOpen))
	mw, err := httplimit.NewFixed(lim, "api", []limiter.Limit{limiter.PerMinute(100)}, httplimit.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Close()
	mw.Handler(ok).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/x", nil))
	if !strings.Contains(buf.String(), "path=/x") {
		t.Errorf("nothing logged at the default level: %q", buf.String())
	}
}
