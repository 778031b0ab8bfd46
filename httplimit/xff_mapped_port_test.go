package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/quotagate/limiter/httplimit"
)

// TestClientIPMappedXFFWithPort: an X-Forwarded-For entry that carries a
// port is unmapped like one without ("IPv4-mapped IPv6 addresses are keyed
// as IPv4"; "An entry may carry a port"): the client is keyed as IPv4, and a
// mapped trusted proxy is skipped.
func TestClientIPMappedXFFWithPort(t *testing.T) {
	k := httplimit.ClientIP(netip.MustParsePrefix("10.0.0.0/8"))
	for xff, want := range map[string]string{
		"[::ffff:198.51.100.9]:443":                      "198.51.100.9",
		"198.51.100.9, [::ffff:10.1.1.1]:80":             "198.51.100.9",
		"[::ffff:198.51.100.9]:443, [::ffff:10.1.1.1]:1": "198.51.100.9",
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "10.0.0.2:1"
		r.Header.Set("X-Forwarded-For", xff)
		if got, err := k(r); err != nil || got != want {
			t.Errorf("XFF %q: %q, %v; want %q", xff, got, err, want)
		}
	}
}
