//go:build unix

package redistest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/quotagate/limiter/internal/redistest"
)

// TestStartWaitsForASlowStart starts a redis-server that takes 6 s to get
// going, as one did on a CI machine whose two cores were busy with four
// test packages at once: the process had written nothing to its log and
// refused connections when the harness gave up after 5 s, and the check
// that asked for it failed. A starved start is waited for.
func TestStartWaitsForASlowStart(t *testing.T) {
	real, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("REQUIRE_REDIS") == "1" {
			t.Fatal("redis-server is not on PATH and REQUIRE_REDIS=1")
		}
		t.Skip("redis-server is not on PATH")
	}
	dir := t.TempDir()
	shim := "#!/bin/sh\nsleep 6\nexec '" + real + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "redis-server"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))

	began := time.Now()
	s := redistest.StartServer(t)
	if took := time.Since(began); took < 6*time.Second {
		t.Fatalf("StartServer returned after %v, before the shim's 6 s sleep ended: not the slow redis-server", took)
	}
	c := newClient(t, s.Addr())
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING after StartServer: %v", err)
	}
}
