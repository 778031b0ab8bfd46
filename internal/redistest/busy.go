package redistest

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// Busy makes the redis-server at addr busy: another client runs a Lua
// script that never ends, and once the server's busy-reply-threshold has
// passed (set to 100 ms here) every other client's command is answered
// with a BUSY error. The returned func kills the script (SCRIPT KILL) and
// waits until the server answers again. Busy needs a private server: it
// changes the server's configuration.
func Busy(t testing.TB, addr string) (end func()) {
	t.Helper()
	admin := dialLine(t, addr)
	// lua-time-limit: the name Redis 6 knows; Redis 7 takes it for
	// busy-reply-threshold.
	if line := admin.call(t, "CONFIG", "SET", "lua-time-limit", "100"); !strings.HasPrefix(line, "+OK") {
		t.Fatalf("CONFIG SET lua-time-limit: %q", line)
	}
	busy := dialLine(t, addr)
	if err := busy.send("EVAL", "local i = 0 while true do i = i + 1 end", "0"); err != nil {
		t.Fatalf("EVAL: %v", err)
	}
	// Past the threshold, the server answers BUSY.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if line := admin.call(t, "PING"); strings.HasPrefix(line, "-BUSY") {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the server answers %q 5s after a script that never ends began", line)
		}
	}
	return func() {
		t.Helper()
		admin.call(t, "SCRIPT", "KILL")
		// The script ends at its next check of the kill flag.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if line := admin.call(t, "PING"); strings.HasPrefix(line, "+PONG") {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("the server answers %q 5s after SCRIPT KILL", line)
			}
		}
		_ = busy.c.Close()
		_ = admin.c.Close()
	}
}

// lineConn is a plain RESP connection for commands whose reply is one line.
type lineConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialLine(t testing.TB, addr string) *lineConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	return &lineConn{c: c, r: bufio.NewReader(c)}
}

func (c *lineConn) send(args ...string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	_, err := c.c.Write([]byte(b.String()))
	return err
}

// call sends a command and returns its one-line reply.
func (c *lineConn) call(t testing.TB, args ...string) string {
	t.Helper()
	_ = c.c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := c.send(args...); err != nil {
		t.Fatalf("%s: %v", args[0], err)
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		t.Fatalf("%s: %v", args[0], err)
	}
	return strings.TrimSpace(line)
}
