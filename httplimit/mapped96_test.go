package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/quotagate/limiter/httplimit"
)

// TestClientIPMappedSlash96: a trusted prefix in IPv4-mapped form is the
// IPv4 one, the whole mapped block (::ffff:0:0/96) included: 0.0.0.0/0.
func TestClientIPMappedSlash96(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.0.2:1"
	r.Header.Set("X-Forwarded-For", "2001:db8::7")
	got, err := httplimit.ClientIP(netip.MustParsePrefix("::ffff:0:0/96"))(r)
	if err != nil || got != "2001:db8::7" {
		t.Errorf("= %q, %v; want 2001:db8::7 (the IPv4 peer is trusted)", got, err)
	}
}
