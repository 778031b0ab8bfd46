package main

import (
	"strings"
	"testing"

	"github.com/quotagate/limiter/internal/redistest"
)

// TestTLSWrongCA: -tls-ca naming a CA that did not sign the server's
// certificate is not trust: check says it cannot use the server (doc.go:
// "a certificate not trusted ... it says why and exits 1"). Only
// -tls-insecure turns verification off.
func TestTLSWrongCA(t *testing.T) {
	s := redistest.StartTLSServer(t)
	other, err := redistest.GenerateTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "check", "-redis", "rediss://"+s.Addr(), "-tls-ca", other.CAFile, "-checks", "weighted-costs")
	if code != 1 || !strings.Contains(out+errOut, "certificate") || strings.Contains(out, "STRATEGY") {
		t.Errorf("exit %d; want 1, no matrix, an error naming the certificate\n%s\n%s", code, out, errOut)
	}
}
