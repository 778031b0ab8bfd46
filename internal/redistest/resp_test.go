package redistest

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestReadValue(t *testing.T) {
	values := []struct{ raw, typ string }{
		{"+OK\r\n", "+"},
		{"-ERR x\r\n", "-"},
		{":42\r\n", ":"},
		{"$-1\r\n", "$"},
		{"$0\r\n\r\n", "$"},
		{"$5\r\na\r\nbc\r\n", "$"}, // CRLF inside a bulk string
		{"*-1\r\n", "*"},
		{"*2\r\n$1\r\na\r\n*1\r\n:1\r\n", "*"},
		{"_\r\n", "_"},
		{",1.5\r\n", ","},
		{"#t\r\n", "#"},
		{"(123456789012345678901234567890\r\n", "("},
		{"!3\r\nERR\r\n", "!"},
		{"=7\r\ntxt:abc\r\n", "="},
		{"%2\r\n+a\r\n:1\r\n$1\r\nb\r\n%1\r\n+x\r\n_\r\n", "%"},
		{"~2\r\n+a\r\n+b\r\n", "~"},
		{">3\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n:0\r\n", ">"},
		{"|1\r\n+ttl\r\n:3\r\n:7\r\n", ":"},                   // attribute belongs to the reply
		{"*2\r\n|1\r\n+a\r\n+b\r\n:1\r\n:2\r\n", "*"},         // attribute on an element
		{"%1\r\n+k\r\n*2\r\n~1\r\n>1\r\n+p\r\n,inf\r\n", "%"}, // nesting
	}
	var stream strings.Builder
	for _, v := range values {
		stream.WriteString(v.raw)
	}
	r := bufio.NewReaderSize(strings.NewReader(stream.String()), 16) // forces ErrBufferFull paths
	for _, v := range values {
		raw, typ, err := readValue(r, nil)
		if err != nil || string(raw) != v.raw || string(typ) != v.typ {
			t.Fatalf("readValue = %q, %q, %v; want %q, %q", raw, typ, err, v.raw, v.typ)
		}
	}
	if _, _, err := readValue(r, nil); err != io.EOF {
		t.Fatalf("at end: %v, want EOF", err)
	}
	for _, bad := range []string{"?x\r\n", "$x\r\n", "+OK\n", "$3\r\nab"} {
		if _, _, err := readValue(bufio.NewReader(strings.NewReader(bad)), nil); err == nil {
			t.Errorf("readValue(%q) succeeded", bad)
		}
	}
}

func TestReadCommand(t *testing.T) {
	cmds := []struct{ raw, name string }{
		{"*2\r\n$3\r\nget\r\n$1\r\nk\r\n", "GET"},
		{"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\nv\r\nv\r\n", "SET"},
		{"ping\r\n", "PING"},
		{"  set k v\r\n", "SET"},
		{"\r\n", ""},
		{"*0\r\n", ""},
		{"*1\r\n$4\r\nEXEC\r\n", "EXEC"},
	}
	var stream strings.Builder
	for _, c := range cmds {
		stream.WriteString(c.raw)
	}
	r := bufio.NewReader(strings.NewReader(stream.String()))
	for _, c := range cmds {
		raw, err := readCommand(r, nil)
		if err != nil || string(raw) != c.raw || commandName(raw) != c.name {
			t.Fatalf("readCommand = %q (%q), %v; want %q (%q)", raw, commandName(raw), err, c.raw, c.name)
		}
	}
}

// rawConn is a hand-driven RESP connection.
type rawConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	return &rawConn{t, c, bufio.NewReader(c)}
}

func (rc *rawConn) send(s string) {
	if _, err := io.WriteString(rc.c, s); err != nil {
		rc.t.Fatal(err)
	}
}

// read returns the next value and its type, or "" and the error.
func (rc *rawConn) read() (string, byte, error) {
	raw, typ, err := readValue(rc.r, nil)
	return string(raw), typ, err
}

func TestProxyInline(t *testing.T) {
	s := StartServer(t) // miniredis does not accept inline commands
	p := NewProxy(t, s.Addr())
	rc := dialRaw(t, p.Addr())
	rc.send("PING\r\n\r\nset k v\r\nGET k\r\n")
	for _, want := range []string{"+PONG\r\n", "+OK\r\n", "$1\r\nv\r\n"} {
		if got, _, err := rc.read(); got != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	}
	if n := p.Commands(); n["PING"] != 1 || n["SET"] != 1 || n["GET"] != 1 || len(n) != 3 {
		t.Fatalf("Commands() = %v", n)
	}
}

// TestProxyPush checks that RESP3 push messages are forwarded but not taken
// as the reply of a pending command: the dropped reply must be ECHO's.
func TestProxyPush(t *testing.T) {
	s := StartServer(t)
	p := NewProxy(t, s.Addr())
	rc := dialRaw(t, p.Addr())
	p.DropReply("ECHO")
	rc.send("HELLO 3\r\nCLIENT TRACKING on\r\nGET k\r\nSET k v\r\nECHO hi\r\n")
	var got []byte
	for {
		_, typ, err := rc.read()
		if err != nil {
			break
		}
		got = append(got, typ)
	}
	// HELLO map, +OK, null, then SET's +OK and the invalidation push in
	// some order, then EOF instead of ECHO's reply.
	if g := string(got); g != "%+_+>" && g != "%+_>+" {
		t.Fatalf("reply types %q, want %q or %q", g, "%+_+>", "%+_>+")
	}
}
