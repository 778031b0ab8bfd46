package redistest

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
)

// fakeRedis answers every line with PONG, or an INFO reply of another pid.
func fakeRedis(t *testing.T) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					reply := "+PONG\r\n"
					if line == "INFO server\r\n" {
						reply = "$14\r\nprocess_id:1\r\n\r\n"
					}
					_, _ = io.WriteString(c, reply)
				}
			}()
		}
	}()
	return ln
}

func plainDial(addr string) (net.Conn, error) { return net.Dial("tcp", addr) }

func TestLaunchOnStolenPort(t *testing.T) {
	ln := fakeRedis(t)
	if err := probe(plainDial, ln.Addr().String(), os.Getpid()); !errors.Is(err, errPortInUse) {
		t.Fatalf("probe of a foreign server = %v, want errPortInUse", err)
	}
	if !Available() {
		t.Skip("redis-server not on PATH")
	}
	s := &Server{dir: t.TempDir()}
	err := s.launch(ln.Addr().(*net.TCPAddr).Port)
	if !errors.Is(err, errPortInUse) {
		stop(plainDial, "", s.proc, s.exited)
		t.Fatalf("launch on a used port = %v, want errPortInUse", err)
	}
}
