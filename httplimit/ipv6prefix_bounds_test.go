package httplimit_test

import (
	"testing"

	"github.com/quotagate/limiter/httplimit"
)

// TestIPv6PrefixBounds: "It panics unless bits is in [1, 128]".
func TestIPv6PrefixBounds(t *testing.T) {
	panics := func(bits int) (p bool) {
		defer func() { p = recover() != nil }()
		httplimit.IPv6Prefix(bits, httplimit.ClientIP())
		return false
	}
	for bits, want := range map[int]bool{-1: true, 0: true, 1: false, 64: false, 128: false, 129: true} {
		if got := panics(bits); got != want {
			t.Errorf("IPv6Prefix(%d): panics %v; want %v", bits, got, want)
		}
	}
}
