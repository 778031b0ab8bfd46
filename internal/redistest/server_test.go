package redistest_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func newClient(t *testing.T, addr string, opts ...func(*redis.Options)) *redis.Client {
	t.Helper()
	o := &redis.Options{Addr: addr, MaxRetries: -1}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestServerRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.StartServer(t)
	addr := s.Addr()
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("Addr() = %q", addr)
	}
	c := newClient(t, addr)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET = %q, %v", got, err)
	}

	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != addr {
		t.Fatalf("Addr changed: %s -> %s", addr, s.Addr())
	}
	c2 := newClient(t, addr) // c's pooled connection is dead
	if err := c2.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after Restart = %v, want redis.Nil", err)
	}
	if err := c2.Set(ctx, "k", "v2", 0).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestServerClose(t *testing.T) {
	t.Parallel()
	if !redistest.Available() {
		t.Skip("redis-server not on PATH")
	}
	s, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if c, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		c.Close()
		t.Fatal("server still accepts connections after Close")
	}
	if err := s.Restart(); err == nil {
		t.Fatal("Restart after Close succeeded")
	}
}

func TestStartBadArgs(t *testing.T) {
	t.Parallel()
	if !redistest.Available() {
		t.Skip("redis-server not on PATH")
	}
	s, err := redistest.Start("--no-such-directive", "x")
	if err == nil {
		s.Close()
		t.Fatal("Start with a bad directive succeeded")
	}
	if !strings.Contains(err.Error(), "no-such-directive") {
		t.Fatalf("error lacks the log tail: %v", err)
	}
}

// recTB records how StartServer gave up.
type recTB struct {
	testing.TB
	how string
}

func (r *recTB) Helper()        {}
func (r *recTB) Fatal(...any)   { r.how = "fatal"; runtime.Goexit() }
func (r *recTB) Skip(...any)    { r.how = "skip"; runtime.Goexit() }
func (r *recTB) Cleanup(func()) { r.how = "started" }

func TestStartServerWithoutRedis(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if redistest.Available() {
		t.Fatal("Available() with an empty PATH")
	}
	if _, err := redistest.Start(); err == nil {
		t.Fatal("Start() with an empty PATH succeeded")
	}
	for env, want := range map[string]string{"": "skip", "1": "fatal"} {
		t.Setenv("REQUIRE_REDIS", env)
		r := &recTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			redistest.StartServer(r)
		}()
		<-done
		if r.how != want {
			t.Errorf("REQUIRE_REDIS=%q: StartServer did %q, want %q", env, r.how, want)
		}
	}
}

func TestTLSServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.StartTLSServer(t)
	certs := s.TLS()
	if certs == nil {
		t.Fatal("TLS() = nil for a TLS server")
	}
	c := newClient(t, s.Addr(), func(o *redis.Options) { o.TLSConfig = certs.ClientConfig() })
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET over TLS: %v", err)
	}
	// The plain port is closed: a client without TLS gets no answer.
	plain := newClient(t, s.Addr(), func(o *redis.Options) { o.DialTimeout, o.ReadTimeout = time.Second, time.Second })
	if err := plain.Ping(ctx).Err(); err == nil {
		t.Fatal("PING without TLS succeeded on a TLS-only server")
	}
	// A client that does not trust the CA is refused with a certificate error.
	untrusted := newClient(t, s.Addr(), func(o *redis.Options) { o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12} })
	var unknown x509.UnknownAuthorityError
	if err := untrusted.Ping(ctx).Err(); !errors.As(err, &unknown) {
		t.Fatalf("PING with an untrusted CA = %v, want x509.UnknownAuthorityError", err)
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart of a TLS server: %v", err)
	}
	c2 := newClient(t, s.Addr(), func(o *redis.Options) { o.TLSConfig = certs.ClientConfig() })
	if err := c2.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING over TLS after Restart: %v", err)
	}
}

func TestTLSProxy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.StartTLSServer(t)
	p := redistest.NewTLSProxy(t, s.Addr(), s.TLS())
	c := newClient(t, p.Addr(), func(o *redis.Options) { o.TLSConfig = s.TLS().ClientConfig() })
	if err := c.Incr(ctx, "n").Err(); err != nil {
		t.Fatalf("INCR through the TLS proxy: %v", err)
	}
	p.DropReply("INCR")
	if err := c.Incr(ctx, "n").Err(); err == nil {
		t.Fatal("INCR whose reply the proxy dropped succeeded")
	}
	if n, err := c.Get(ctx, "n").Int(); err != nil || n != 2 {
		t.Fatalf("GET n = %d, %v; want 2 (the dropped INCR ran)", n, err)
	}
	if got := p.Commands()["INCR"]; got != 2 {
		t.Fatalf("proxy forwarded %d INCR, want 2", got)
	}
}

// TestRefusedAddr: a connection to RefusedAddr is refused, and the port
// stays taken (another listener cannot have it) while the test runs.
func TestRefusedAddr(t *testing.T) {
	addr := redistest.RefusedAddr(t)
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		_ = c.Close()
		t.Fatalf("dial %s succeeded; want refused", addr)
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v; want ECONNREFUSED", addr, err)
	}
	if ln, err := net.Listen("tcp", addr); err == nil {
		_ = ln.Close()
		t.Fatalf("listen on %s succeeded; want the port taken", addr)
	}
}
