package redistest

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// startTimeout is how long to wait for PING after a start. A
	// redis-server needs milliseconds of CPU to start, but on a 2-core
	// machine busy with several test packages at once one took over 5 s
	// before it had written its first log line or listened.
	startTimeout = 30 * time.Second
	stopTimeout  = 3 * time.Second // grace period before SIGTERM, then SIGKILL
)

var errPortInUse = errors.New("port already in use")

// Server is a redis-server process on a free loopback port, in a fresh temp
// dir, started with --save "" --appendonly no (nothing is persisted).
type Server struct {
	dir  string
	port int
	args []string
	tls  *TLS // nil: plain TCP

	mu     sync.Mutex
	proc   *os.Process
	exited chan struct{} // closed once proc has been reaped
	closed bool
}

// Available reports whether a redis-server binary is on PATH.
func Available() bool {
	_, err := exec.LookPath("redis-server")
	return err == nil
}

// StartServer starts a redis-server for a test and registers t.Cleanup to
// stop it. If redis-server is not on PATH it calls t.Skip, unless the
// environment variable REQUIRE_REDIS=1, in which case it calls t.Fatal.
func StartServer(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	return startFor(t, extraArgs, nil)
}

// StartTLSServer is StartServer for a server that accepts only TLS
// connections, with certificates generated for it (see Server.TLS).
func StartTLSServer(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	return startFor(t, extraArgs, func() (*TLS, error) { return GenerateTLS(t.TempDir()) })
}

// startFor starts a server for t (TLS when certs is not nil), skipping or
// failing without redis-server, and stops it when t ends.
func startFor(t testing.TB, extraArgs []string, certs func() (*TLS, error)) *Server {
	t.Helper()
	if !Available() {
		if os.Getenv("REQUIRE_REDIS") == "1" {
			t.Fatal("redistest: redis-server is not on PATH and REQUIRE_REDIS=1")
		}
		t.Skip("redistest: redis-server is not on PATH")
	}
	var c *TLS
	if certs != nil {
		var err error
		if c, err = certs(); err != nil {
			t.Fatal(err)
		}
	}
	s, err := start(freePort, extraArgs, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// Start starts a redis-server with extraArgs appended to its command line.
// It returns an error when redis-server is missing or fails to start; the
// caller must call Close.
func Start(extraArgs ...string) (*Server, error) {
	if !Available() {
		return nil, errors.New("redistest: redis-server is not on PATH")
	}
	return start(freePort, extraArgs, nil)
}

// start launches redis-server with args in a fresh temp dir, on a port from
// pick, and picks another port when the chosen one turns out to be in use.
func start(pick func() (int, error), args []string, certs *TLS) (*Server, error) {
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, args: args, tls: certs}
	for attempt := 1; ; attempt++ {
		var port int
		if port, err = pick(); err == nil {
			if err = s.launch(port); err == nil {
				s.port = port
				return s, nil
			}
		}
		if attempt == 5 || !errors.Is(err, errPortInUse) {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
}

// Addr returns the server address, "127.0.0.1:PORT".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// TLS returns the certificates of a server started by StartTLSServer, nil
// for a plain one.
func (s *Server) TLS() *TLS { return s.tls }

// dial connects to the server at addr as a client, over TLS when it is a
// TLS server.
func (s *Server) dial(addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: time.Second}
	if s.tls != nil {
		return tls.DialWithDialer(d, "tcp", addr, s.tls.ClientConfig())
	}
	return d.Dial("tcp", addr)
}

// Restart stops the server and starts it again on the same port. All data is
// lost. It returns once the new process answers PING.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("redistest: Restart on a closed Server")
	}
	stop(s.dial, s.Addr(), s.proc, s.exited)
	var err error
	for range 10 { // the old socket may linger for a moment
		if err = s.launch(s.port); !errors.Is(err, errPortInUse) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// Close stops the process and removes its temp dir. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	stop(s.dial, s.Addr(), s.proc, s.exited)
	return os.RemoveAll(s.dir)
}

// launch starts redis-server on port and waits until it answers PING.
// On success it sets s.proc and s.exited.
func (s *Server) launch(port int) error {
	logPath := filepath.Join(s.dir, "redis.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	logStart, _ := logf.Seek(0, io.SeekEnd)
	args := []string{"--port", strconv.Itoa(port)}
	if s.tls != nil {
		args = s.tls.serverArgs(port)
	}
	args = append(append(args,
		"--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--dir", s.dir, "--logfile", logPath,
	), s.args...)
	cmd := exec.Command("redis-server", args...)
	cmd.Stdout, cmd.Stderr = logf, logf // errors before the logfile is opened
	err = cmd.Start()
	logf.Close()
	if err != nil {
		return fmt.Errorf("redistest: starting redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitReady(s.dial, addr, cmd.Process.Pid, exited); err != nil {
		stop(s.dial, "", cmd.Process, exited) // addr may belong to another process
		tail := logTail(logPath, logStart)
		switch {
		case strings.Contains(tail, "already in use"):
			err = errPortInUse
		case tail == "":
			tail = "(empty: the process had not started up; load average " + loadAvg() + ")"
		}
		return fmt.Errorf("redistest: redis-server on %s: %w; log:\n%s", addr, err, tail)
	}
	s.proc, s.exited = cmd.Process, exited
	return nil
}

// waitReady polls addr until the redis-server with the given pid answers.
func waitReady(dial func(string) (net.Conn, error), addr string, pid int, exited <-chan struct{}) error {
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-exited:
			return errors.New("redis-server exited during start-up")
		default:
		}
		err := probe(dial, addr, pid)
		if err == nil || errors.Is(err, errPortInUse) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer to PING within %v: %w", startTimeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// probe sends a raw PING to addr and checks, with INFO, that the answering
// server is the process pid (and not one that stole the port).
func probe(dial func(string) (net.Conn, error), addr string, pid int) error {
	c, err := dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	r := bufio.NewReader(c)
	if _, err := io.WriteString(c, "PING\r\n"); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	switch {
	case err != nil:
		return err
	case strings.HasPrefix(line, "-NOAUTH"):
		return nil // alive but password-protected (extraArgs): cannot check pid
	case !strings.HasPrefix(line, "+PONG"):
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	if _, err := io.WriteString(c, "INFO server\r\n"); err != nil {
		return err
	}
	reply, _, err := readValue(r, nil)
	if err != nil {
		return err
	}
	if !strings.Contains(string(reply), fmt.Sprintf("\nprocess_id:%d\r\n", pid)) {
		return errPortInUse
	}
	return nil
}

// stop stops proc and reaps it. If addr is not "", it first sends
// SHUTDOWN NOSAVE there: unlike SIGTERM, which Redis handles on its next
// 100ms cron tick, it is immediate. Then SIGTERM, then SIGKILL.
func stop(dial func(string) (net.Conn, error), addr string, proc *os.Process, exited <-chan struct{}) {
	if proc == nil {
		return
	}
	exitedWithin := func(d time.Duration) bool {
		select {
		case <-exited:
			return true
		case <-time.After(d):
			return false
		}
	}
	if exitedWithin(0) {
		return
	}
	if addr != "" {
		if c, err := dial(addr); err == nil {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			_, _ = io.WriteString(c, "SHUTDOWN NOSAVE\r\n")
			_, _ = c.Read(make([]byte, 64)) // returns once the server has gone
			c.Close()
			if exitedWithin(stopTimeout) {
				return
			}
		}
	}
	_ = proc.Signal(syscall.SIGTERM)
	if !exitedWithin(stopTimeout) {
		_ = proc.Kill()
		<-exited
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// loadAvg returns the machine's 1, 5 and 15 minute load averages, or "?"
// where the system does not publish them as Linux does.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

// logTail returns the last few KiB that were written to path after offset.
func logTail(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil || offset > int64(len(b)) {
		return fmt.Sprintf("(no log: %v)", err)
	}
	b = b[offset:]
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return string(b)
}
