package main

import (
	"crypto/tls"
	"errors"
	"testing"
)

// TestTLSFlagsConfig: -tls-insecure turns verification off, and
// -tls-key without -tls-cert is a usage error.
func TestTLSFlagsConfig(t *testing.T) {
	f := tlsFlags{insecure: true}
	cfg, err := f.config(&tls.Config{ServerName: "cache.example"})
	if err != nil || cfg == nil || !cfg.InsecureSkipVerify {
		t.Errorf("-tls-insecure: %+v, %v; want InsecureSkipVerify", cfg, err)
	}
	f = tlsFlags{key: "/nonexistent/key.pem"}
	if _, err := f.config(&tls.Config{}); !errors.Is(err, errUsage) {
		t.Errorf("-tls-key alone: %v; want a usage error", err)
	}
}
