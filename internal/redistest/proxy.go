package redistest

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// setupCommands are the connection set-up commands that an empty match
// ("any command") passed to DropReply or CutBefore does not match.
var setupCommands = map[string]bool{
	"HELLO": true, "AUTH": true, "CLIENT": true, "SELECT": true, "READONLY": true, "PING": true,
}

// Proxy forwards TCP connections to a target Redis, understanding RESP2 and
// RESP3 framing in both directions, so that faults hit whole commands and
// whole replies. Replies are matched to commands in FIFO order; push
// messages ('>') are forwarded without being matched. Subscribe mode is not
// supported.
type Proxy struct {
	target string
	ln     net.Listener
	certs  *TLS // nil: plain TCP on both sides
	wg     sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	conns     map[*proxyConn]struct{}
	counts    map[string]int
	delay     time.Duration
	blackhole bool
	drop      *fault
	cut       *fault
	dropped   []byte // the raw reply DropReply last discarded
}

type fault struct {
	match string // upper-cased command name; "" = any non-set-up command
	skip  int
	reset bool // DropReply: reset the client connection, not close it
}

func (f *fault) matches(name string) bool {
	if f.match == "" {
		return !setupCommands[name]
	}
	return f.match == name
}

// NewProxy starts a Proxy to target (host:port, or the path of a Unix
// socket) on 127.0.0.1:0 and closes it when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	return newProxy(t, target, nil)
}

// NewTLSProxy is NewProxy for a target that accepts only TLS: the proxy
// ends its clients' TLS with the server certificate of certs (the one the
// target presents) and speaks TLS to the target as certs' client, so its
// faults see whole commands and replies as over plain TCP.
func NewTLSProxy(t testing.TB, target string, certs *TLS) *Proxy {
	t.Helper()
	return newProxy(t, target, certs)
}

func newProxy(t testing.TB, target string, certs *TLS) *Proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if certs != nil {
		ln = tls.NewListener(ln, certs.ServerConfig())
	}
	p := &Proxy{target: target, ln: ln, certs: certs, conns: map[*proxyConn]struct{}{}, counts: map[string]int{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// Addr returns the proxy's listening address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// DropReply arms a one-shot fault: the next command named match
// (case-insensitive; "" = any command except the connection set-up commands
// HELLO, AUTH, CLIENT, SELECT, READONLY and PING) is forwarded, the server's
// reply to it is read and discarded, and the client connection is closed.
// The command ran, but the client never learns the outcome. Commands that
// the client sent after it on the same connection are not forwarded.
func (p *Proxy) DropReply(match string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop = &fault{match: strings.ToUpper(match)}
	p.dropped = nil
}

// ResetReply is DropReply with the client connection reset (a TCP RST)
// instead of closed: the client's read fails with "connection reset by
// peer" rather than at the end of the stream.
func (p *Proxy) ResetReply(match string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop = &fault{match: strings.ToUpper(match), reset: true}
	p.dropped = nil
}

// Dropped returns a copy of the raw reply (RESP) that the last fault armed
// by DropReply read and discarded, or nil before one has. A check reads it
// to tell a command that ran from one the server refused (a NOSCRIPT, say,
// when the script cache was emptied meanwhile).
func (p *Proxy) Dropped() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Clone(p.dropped)
}

// CutBefore arms a one-shot fault: skip matching commands (same matching
// rule as DropReply) pass, then, instead of forwarding the next matching
// command, the client connection and its server connection are closed;
// nothing from that command on reaches the server. Replies to the commands
// forwarded before it are still delivered first. CutBefore("", n) thus cuts
// the connection after n commands.
func (p *Proxy) CutBefore(match string, skip int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = &fault{match: strings.ToUpper(match), skip: skip}
}

// Disarm drops the one-shot faults armed by DropReply and CutBefore that
// have not fired, and reports whether there were any: a call that ended
// (say at its deadline) before reaching its fault must not leave it for the
// next one.
func (p *Proxy) Disarm() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	armed := p.cut != nil || p.drop != nil
	p.cut, p.drop = nil, nil
	return armed
}

// Delay delays every reply by d until Delay(0) is called: a reply reaches
// the client no earlier than d after its command was forwarded. The delay
// in force when a command is forwarded applies to its reply.
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Blackhole, when on, makes the proxy accept connections and read commands
// but never forward or answer them, on existing and new connections. A
// connection that has swallowed a command stays silent; turning Blackhole
// off closes such connections and restores normal forwarding for others.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	p.blackhole = on
	var dead []*proxyConn
	if !on {
		for c := range p.conns {
			if c.blackholed.Load() {
				dead = append(dead, c)
			}
		}
	}
	p.mu.Unlock()
	for _, c := range dead {
		c.close()
	}
}

// Commands returns how many commands with each upper-cased name were
// forwarded to the server since the last ResetCounts.
func (p *Proxy) Commands() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[string]int, len(p.counts))
	for k, v := range p.counts {
		m[k] = v
	}
	return m
}

// ResetCounts sets all command counts to zero.
func (p *Proxy) ResetCounts() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.counts)
}

// Close closes the listener and all connections and waits for the proxy's
// goroutines to finish. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	for _, c := range conns {
		c.close()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		cc, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		} else if err != nil {
			time.Sleep(10 * time.Millisecond) // e.g. out of file descriptors
			continue
		}
		p.wg.Add(1)
		go p.handle(cc)
	}
}

func (p *Proxy) handle(cc net.Conn) {
	defer p.wg.Done()
	d := &net.Dialer{Timeout: 5 * time.Second}
	var sc net.Conn
	var err error
	if p.certs != nil {
		sc, err = tls.DialWithDialer(d, "tcp", p.target, p.certs.ClientConfig())
	} else if strings.Contains(p.target, "/") {
		sc, err = d.Dial("unix", p.target) // a Unix socket's path
	} else {
		sc, err = d.Dial("tcp", p.target)
	}
	if err != nil {
		cc.Close()
		return
	}
	c := &proxyConn{p: p, client: cc, server: sc, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		cc.Close()
		sc.Close()
		return
	}
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		c.replies()
	}()
	c.commands()
}

type action int

const (
	forward action = iota
	dropReply
	cut
	swallow
)

// decide picks what happens to the next command named name on c.
func (p *Proxy) decide(c *proxyConn, name string) (action, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blackhole || c.blackholed.Load() {
		c.blackholed.Store(true)
		return swallow, 0
	}
	if p.cut != nil && p.cut.matches(name) {
		if p.cut.skip == 0 {
			p.cut = nil
			return cut, 0
		}
		p.cut.skip--
	}
	p.counts[name]++
	if p.drop != nil && p.drop.matches(name) {
		if p.drop.reset {
			c.reset.Store(true)
		}
		p.drop = nil
		return dropReply, p.delay
	}
	return forward, p.delay
}

// proxyConn is one proxied client connection and its server connection.
type proxyConn struct {
	p              *Proxy
	client, server net.Conn
	blackholed     atomic.Bool
	reset          atomic.Bool // close the client connection with a RST
	done           chan struct{}
	closeOnce      sync.Once

	mu       sync.Mutex
	pending  []pendingReply // commands forwarded and not yet answered, FIFO
	stopping bool           // no more commands will be forwarded
}

type pendingReply struct {
	due  time.Time // deliver no earlier than this
	drop bool      // discard the reply and close
}

func (c *proxyConn) close() {
	c.closeOnce.Do(func() {
		close(c.done)
		if c.reset.Load() {
			conn := c.client
			if tc, ok := conn.(*tls.Conn); ok {
				conn = tc.NetConn()
			}
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // Close sends a RST
			}
		}
		c.client.Close()
		c.server.Close()
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	})
}

// commands copies commands from the client to the server, applying faults.
func (c *proxyConn) commands() {
	r := bufio.NewReader(c.client)
	w := bufio.NewWriter(c.server)
	var buf []byte
	for {
		raw, err := readCommand(r, buf[:0])
		if err != nil {
			c.close()
			return
		}
		buf = raw
		name := commandName(raw)
		if name == "" {
			continue // Redis does not answer an empty command
		}
		act, delay := c.p.decide(c, name)
		if act == forward || act == dropReply {
			c.mu.Lock()
			c.pending = append(c.pending, pendingReply{due: time.Now().Add(delay), drop: act == dropReply})
			c.mu.Unlock()
			_, _ = w.Write(raw) // errors surface at Flush
		}
		if act == cut || act == dropReply {
			c.stop(w)
			return
		}
		if r.Buffered() == 0 && w.Flush() != nil {
			c.close()
			return
		}
	}
}

// stop flushes w and stops forwarding; the connection closes once all
// forwarded commands have been answered.
func (c *proxyConn) stop(w *bufio.Writer) {
	if w.Flush() != nil {
		c.close()
		return
	}
	c.mu.Lock()
	c.stopping = true
	idle := len(c.pending) == 0
	c.mu.Unlock()
	if idle {
		c.close()
	}
}

// replies copies replies from the server to the client, matching them to
// pending commands.
func (c *proxyConn) replies() {
	r := bufio.NewReader(c.server)
	w := bufio.NewWriter(c.client)
	var buf []byte
	for {
		raw, typ, err := readValue(r, buf[:0])
		if err != nil {
			c.close()
			return
		}
		buf = raw
		var e pendingReply
		c.mu.Lock()
		matched := typ != '>' && len(c.pending) > 0 // unmatched: out-of-band
		if matched {
			e = c.pending[0]
		}
		c.mu.Unlock()
		if d := time.Until(e.due); d > 0 {
			if w.Flush() != nil {
				c.close()
				return
			}
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-c.done:
				t.Stop()
				return
			}
		}
		if e.drop {
			c.p.mu.Lock()
			c.p.dropped = bytes.Clone(raw)
			c.p.mu.Unlock()
		} else if !c.blackholed.Load() {
			_, _ = w.Write(raw)
		}
		finished := false
		if matched { // pop only now, so stop() cannot close before delivery
			c.mu.Lock()
			c.pending = c.pending[1:]
			finished = e.drop || (c.stopping && len(c.pending) == 0)
			c.mu.Unlock()
		}
		if finished || r.Buffered() == 0 {
			if err := w.Flush(); err != nil || finished {
				c.close()
				return
			}
		}
	}
}
