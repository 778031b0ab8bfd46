package httplimit_test

import (
	"net/http/httptest"
	"testing"

	"github.com/quotagate/limiter/httplimit"
)

func TestIPv6PrefixMappedIPv4(t *testing.T) {
	k := httplimit.IPv6Prefix(64, httplimit.Header("X-Real-IP"))
	key := func(ip string) string {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Real-IP", ip)
		s, _ := k(r)
		return s
	}
	if a, b := key("::ffff:192.0.2.1"), key("::ffff:198.51.100.9"); a != "192.0.2.1" || b != "198.51.100.9" {
		t.Errorf("IPv4-mapped clients keyed %q and %q; want 192.0.2.1 and 198.51.100.9, as ClientIP keys them", a, b)
	}
	if a, b := key("2001:db8::1"), key("2001:db8::2:1"); a != "2001:db8::/64" || b != a {
		t.Errorf("one /64 keyed %q and %q; want 2001:db8::/64", a, b)
	}
}
