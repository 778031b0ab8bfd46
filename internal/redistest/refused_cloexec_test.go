//go:build linux

package redistest_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/quotagate/limiter/internal/redistest"
)

// TestRefusedAddrNotInherited: RefusedAddr's socket is made with
// syscall.Socket, which (unlike the net package) does not set
// close-on-exec. Every child the test process starts while it is open (a
// redis-server of a parallel test: StartServer execs one) inherits the
// bound socket and keeps the port bound after the test's Cleanup closed
// its own descriptor. A child started here must hold no socket beyond
// what it was given.
func TestRefusedAddrNotInherited(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc")
	}
	// The child lists its own descriptors: 0, 1 and 2 are given; any other
	// that is a socket was inherited.
	inherited := func() []string {
		out, err := exec.Command("sh", "-c", "for f in /proc/$$/fd/*; do n=${f##*/}; if [ $n -gt 2 ]; then echo $n $(readlink $f); fi; done").CombinedOutput()
		if err != nil {
			t.Fatalf("sh: %v: %s", err, out)
		}
		var socks []string
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if strings.Contains(line, "socket:") {
				socks = append(socks, line)
			}
		}
		return socks
	}
	if before := inherited(); len(before) != 0 {
		t.Skipf("a child inherits sockets %q before RefusedAddr: cannot tell", before)
	}
	addr := redistest.RefusedAddr(t)
	if after := inherited(); len(after) != 0 {
		t.Errorf("a child process started while RefusedAddr (%s) is open inherited %q (none before the call): the port stays bound for the child's life", addr, after)
	}
}
