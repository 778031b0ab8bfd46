package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	clusterBusOffset     = 10000            // the cluster bus listens on port+10000
	clusterSlots         = 16384            // hash slots in a Redis Cluster
	clusterCreateTimeout = 30 * time.Second // for redis-cli --cluster create
	clusterReadyTimeout  = 10 * time.Second // for every node to see the full, ok cluster
)

// Cluster is a Redis Cluster of n masters (no replicas), each a redis-server
// on free loopback ports (P for clients and P+10000 for the cluster bus), in
// its own temp dir, with nothing persisted.
type Cluster struct {
	nodes []*Server

	mu     sync.Mutex
	closed bool
}

// clusterAvailable reports why a cluster cannot be started, or nil.
func clusterAvailable() error {
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("redistest: %s is not on PATH", bin)
		}
	}
	return nil
}

// StartCluster starts a 3-master cluster for a test and registers t.Cleanup
// to stop it. If redis-server or redis-cli is not on PATH it calls t.Skip,
// unless the environment variable REQUIRE_REDIS=1, in which case it calls
// t.Fatal.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	if err := clusterAvailable(); err != nil {
		if os.Getenv("REQUIRE_REDIS") == "1" {
			t.Fatal(err.Error() + " and REQUIRE_REDIS=1")
		}
		t.Skip(err.Error())
	}
	c, err := StartClusterN(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// StartClusterN starts a cluster of n >= 3 masters and returns once every
// node reports cluster_state:ok with all 16384 slots assigned and knows all
// n masters. The caller must call Close.
func StartClusterN(n int) (*Cluster, error) {
	if n < 3 {
		return nil, fmt.Errorf("redistest: a cluster needs at least 3 masters, not %d", n)
	}
	if err := clusterAvailable(); err != nil {
		return nil, err
	}
	args := []string{
		"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "2000",
	}
	ports := &clusterPorts{used: make(map[int]bool)}
	c := &Cluster{nodes: make([]*Server, n)}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { c.nodes[i], errs[i] = start(ports.pick, args, nil) })
	}
	wg.Wait()
	c.nodes = slices.DeleteFunc(c.nodes, func(s *Server) bool { return s == nil })
	if err := errors.Join(errs...); err != nil {
		_ = c.Close()
		return nil, err
	}

	out, err := c.create()
	if err == nil {
		err = c.waitReady()
	}
	if err != nil {
		err = fmt.Errorf("%w\nredis-cli --cluster create output:\n%s\n%s", err, clusterTail(out), c.logTails())
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// Addrs returns the addresses, "127.0.0.1:PORT", of all masters.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// StopMasterOf stops the master that serves key's slot, its process gone
// as after a crash (no replica takes over: the slot is left unserved), and
// returns its address. Close stops the others as it does.
func (c *Cluster) StopMasterOf(key string) (string, error) {
	first := c.nodes[0].Addr()
	slot, err := clusterCmd(first, "CLUSTER", "KEYSLOT", key)
	if err != nil {
		return "", err
	}
	n, err := strconv.Atoi(slot)
	if err != nil {
		return "", fmt.Errorf("redistest: CLUSTER KEYSLOT %s = %q: %w", key, slot, err)
	}
	nodes, err := clusterCmd(first, "CLUSTER", "NODES")
	if err != nil {
		return "", err
	}
	id, err := SlotOwner(nodes, n)
	if err != nil {
		return "", err
	}
	for _, s := range c.nodes {
		if myID, err := clusterCmd(s.Addr(), "CLUSTER", "MYID"); err == nil && myID == id {
			return s.Addr(), s.Close()
		}
	}
	return "", fmt.Errorf("redistest: no node of the cluster has the ID %s, the owner of slot %d", id, n)
}

// Close stops all nodes and removes their temp dirs. It is idempotent.
func (c *Cluster) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, s := range c.nodes {
		wg.Go(func() { errs[i] = s.Close() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// create joins the nodes with redis-cli, which assigns the slots evenly,
// meets the nodes and waits until their configurations agree.
func (c *Cluster) create() ([]byte, error) {
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), clusterCreateTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "redis-cli", args...)
	cmd.WaitDelay = time.Second
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { c.introduce(done) })
	out, err := cmd.CombinedOutput()
	close(done)
	wg.Wait()
	if err != nil {
		return out, fmt.Errorf("redistest: redis-cli --cluster create: %w", err)
	}
	return out, nil
}

// introduce speeds up the join. redis-cli has every node meet the first
// one, sleeps a second and then checks, once a second, whether all nodes
// agree on the slot map; gossip alone often needs more than that second. So,
// as soon as redis-cli's CLUSTER MEETs have started (and with them all its
// slot and epoch assignments are done), every node meets every node it does
// not know yet. A MEET that races with gossip or redis-cli is harmless.
func (c *Cluster) introduce(done <-chan struct{}) {
	addrs := c.Addrs()
	for {
		select {
		case <-done:
			return
		case <-time.After(20 * time.Millisecond):
		}
		known := make([]string, len(addrs)) // CLUSTER NODES of each node
		started := false
		for i, addr := range addrs {
			known[i], _ = clusterCmd(addr, "CLUSTER", "NODES")
			started = started || strings.Count(known[i], "\n") > 1
		}
		if !started {
			continue
		}
		for i, addr := range addrs {
			for j, peer := range addrs {
				if i != j && !strings.Contains(known[i], " "+peer+"@") {
					host, port, _ := net.SplitHostPort(peer)
					_, _ = clusterCmd(addr, "CLUSTER", "MEET", host, port)
				}
			}
		}
		return
	}
}

// waitReady polls the nodes until clusterCheck passes.
func (c *Cluster) waitReady() error {
	deadline := time.Now().Add(clusterReadyTimeout)
	for {
		err := c.check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: cluster not ready within %v: %w", clusterReadyTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// check reports whether every node has cluster_state:ok, all slots ok, and
// the same view of the masters: all of them, connected, with all the slots.
// A client may then bootstrap from any node and see the full slot map.
func (c *Cluster) check() error {
	var first map[string]string
	for _, s := range c.nodes {
		info, err := clusterCmd(s.Addr(), "CLUSTER", "INFO")
		if err != nil {
			return err
		}
		for _, want := range []string{"cluster_state:ok", "cluster_slots_ok:" + strconv.Itoa(clusterSlots)} {
			if !strings.Contains(info, "\n"+want+"\r\n") && !strings.HasPrefix(info, want+"\r\n") {
				return fmt.Errorf("%s: no %s in CLUSTER INFO:\n%s", s.Addr(), want, info)
			}
		}
		nodes, err := clusterCmd(s.Addr(), "CLUSTER", "NODES")
		if err != nil {
			return err
		}
		view, err := parseClusterNodes(nodes)
		if err == nil && len(view) != len(c.nodes) {
			err = fmt.Errorf("%d masters, want %d", len(view), len(c.nodes))
		}
		for _, addr := range c.Addrs() {
			if _, ok := view[addr]; !ok && err == nil {
				err = fmt.Errorf("master %s missing", addr)
			}
		}
		if err == nil && first != nil && !maps.Equal(view, first) {
			err = errors.New("view differs from the first node's")
		}
		if err != nil {
			return fmt.Errorf("%s: CLUSTER NODES: %w:\n%s", s.Addr(), err, nodes)
		}
		first = view
	}
	return nil
}

// slotRange reads one slot field of a CLUSTER NODES line, "lo-hi" or
// "slot"; ok is false for a slot being migrated or imported ("[...]").
func slotRange(r string) (lo, hi int, ok bool, err error) {
	if strings.HasPrefix(r, "[") {
		return 0, 0, false, nil
	}
	l, h, isRange := strings.Cut(r, "-")
	if !isRange {
		h = l
	}
	lo, err1 := strconv.Atoi(l)
	hi, err2 := strconv.Atoi(h)
	if err1 != nil || err2 != nil || hi < lo {
		return 0, 0, false, fmt.Errorf("bad slot range %q", r)
	}
	return lo, hi, true, nil
}

// SlotOwner returns the ID of the node that serves slot in a CLUSTER NODES
// reply (slots being migrated count for their owner, not their target).
func SlotOwner(reply string, slot int) (string, error) {
	for line := range strings.Lines(reply) {
		f := strings.Fields(line)
		for _, r := range f[min(8, len(f)):] {
			lo, hi, ok, err := slotRange(r)
			if err != nil {
				return "", err
			}
			if ok && lo <= slot && slot <= hi {
				return f[0], nil
			}
		}
	}
	return "", fmt.Errorf("redistest: no node serves slot %d", slot)
}

// parseClusterNodes maps the address of each healthy, connected master in a
// CLUSTER NODES reply to "ID SLOTS", and checks that they cover all slots.
func parseClusterNodes(reply string) (map[string]string, error) {
	view := make(map[string]string)
	covered := 0
	for line := range strings.Lines(reply) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("malformed line %q", line)
		}
		id, addr, flags, link := f[0], f[1], ","+f[2]+",", f[7]
		addr, _, _ = strings.Cut(addr, "@") // ip:port@cport[,hostname]
		if !strings.Contains(flags, ",master,") {
			continue
		}
		for _, bad := range []string{",fail,", ",fail?,", ",handshake,", ",noaddr,"} {
			if strings.Contains(flags, bad) {
				return nil, fmt.Errorf("master %s is %s", addr, f[2])
			}
		}
		if link != "connected" {
			return nil, fmt.Errorf("master %s is %s", addr, link)
		}
		var slots []string
		for _, r := range f[8:] {
			a, b, ok, err := slotRange(r)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			covered += b - a + 1
			slots = append(slots, r)
		}
		if len(slots) == 0 {
			return nil, fmt.Errorf("master %s has no slots", addr)
		}
		view[addr] = id + " " + strings.Join(slots, " ")
	}
	if covered != clusterSlots {
		return nil, fmt.Errorf("%d slots covered, want %d", covered, clusterSlots)
	}
	return view, nil
}

// clusterCmd sends one command to addr on a new connection and returns the
// reply, which must be a simple or bulk string or an integer (its digits).
// An error reply is an error.
func clusterCmd(addr string, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	req := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		req = append(req, "$"+strconv.Itoa(len(a))+"\r\n"+a+"\r\n"...)
	}
	if _, err := conn.Write(req); err != nil {
		return "", err
	}
	reply, typ, err := readValue(bufio.NewReader(conn), nil)
	if err != nil {
		return "", err
	}
	switch typ {
	case '+', ':':
		return string(reply[1 : len(reply)-2]), nil
	case '-':
		return "", fmt.Errorf("%s: %s", strings.Join(args, " "), reply[1:len(reply)-2])
	case '$':
		if _, body, ok := strings.Cut(string(reply), "\r\n"); ok && len(body) >= 2 {
			return body[:len(body)-2], nil
		}
	}
	return "", fmt.Errorf("%s: unexpected reply %q", strings.Join(args, " "), reply)
}

// logTails returns the end of every node's log.
func (c *Cluster) logTails() string {
	var b strings.Builder
	for _, s := range c.nodes {
		fmt.Fprintf(&b, "--- log of %s ---\n%s\n", s.Addr(), logTail(filepath.Join(s.dir, "redis.log"), 0))
	}
	return b.String()
}

// clusterTail returns the last 2 KiB of out.
func clusterTail(out []byte) []byte {
	if len(out) > 2048 {
		out = out[len(out)-2048:]
	}
	return out
}

// clusterPorts picks ports P for cluster nodes such that P and its bus port
// P+10000 are both free and neither clashes with another node's pair.
type clusterPorts struct {
	mu   sync.Mutex
	used map[int]bool
}

func (p *clusterPorts) pick() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range 100 {
		port, err := freePort()
		if err != nil {
			return 0, err
		}
		bus := port + clusterBusOffset
		if bus > 65535 || p.used[port] || p.used[bus] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(bus)))
		if err != nil {
			continue
		}
		ln.Close()
		p.used[port], p.used[bus] = true, true
		return port, nil
	}
	return 0, errors.New("redistest: found no free port P with P+10000 free")
}
