package conformance

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
)

// Harness is one store under test on one Redis, made afresh for every check.
type Harness interface {
	// Store returns the store under test, connected to the backend.
	Store() store.Store
	// Nodes returns a store connected to each master of the backend: the
	// Store itself for a single server, one per master for a Cluster. The
	// suite scans keys and flushes scripts through them.
	Nodes() []store.Store
	// Dial returns another store of the same adapter connected to addr (a
	// fault proxy in front of the backend) and a func that closes it;
	// store.ErrNotSupported unless Caps().Proxy.
	Dial(ctx context.Context, addr string) (store.Store, func(), error)
	// Addr returns the backend's host:port (a Cluster's first master).
	Addr() string
	// Advance moves the backend's clock forward by d. A real server's clock
	// cannot be moved: Advance sleeps.
	Advance(d time.Duration)
	// Caps reports what the backend allows.
	Caps() Caps
	// Restart restarts the backend, losing its data; store.ErrNotSupported
	// unless Caps().Restart.
	Restart() error
	// Close releases the harness.
	Close()
}

// Caps are the abilities of a Harness's backend.
type Caps struct {
	// VirtualClock: Advance is instantaneous, so long waits cost nothing and
	// TTLs do not run down between two commands.
	VirtualClock bool
	// Restart: the backend can be restarted.
	Restart bool
	// Private: the backend belongs to the suite, so it may flush the script
	// cache. A shared server is only ever touched under the check's prefix.
	Private bool
	// Proxy: a fault proxy can stand between a store and the backend (a
	// single server; a Cluster's clients would go around it).
	Proxy bool
	// Cluster: the backend is a Redis Cluster, so keys are checked against
	// the server's CLUSTER KEYSLOT.
	Cluster bool
	// TLS: the backend accepts only TLS connections. A fault proxy can
	// stand in front of it only when the harness holds the server's
	// certificate (RedisServerTLS); otherwise Proxy is false.
	TLS bool
}

// HarnessMaker makes a Harness for one check. It may call t.Skip (a backend
// that is not installed) or t.Fatal.
type HarnessMaker func(ctx context.Context, t testing.TB) (Harness, error)

// Dialer connects a store of the adapter under test to the Redis at addr
// (host:port) and returns it with a func that closes it. Adapters pass one to
// Miniredis, RedisServer or RedisAt.
type Dialer func(ctx context.Context, addr string) (st store.Store, closeFn func(), err error)

type harness struct {
	dial    Dialer
	st      store.Store
	nodes   []store.Store
	closeSt func()
	addr    string
	caps    Caps
	mini    *redistest.Mini
	server  *redistest.Server
}

// newProxy starts a fault proxy in front of the backend: one that ends and
// restarts TLS when the harness made the server's certificates.
func (h *harness) newProxy(t testing.TB) *redistest.Proxy {
	if h.server != nil && h.server.TLS() != nil {
		return redistest.NewTLSProxy(t, h.addr, h.server.TLS())
	}
	return redistest.NewProxy(t, h.addr)
}

func (h *harness) Store() store.Store { return h.st }
func (h *harness) Addr() string       { return h.addr }
func (h *harness) Caps() Caps         { return h.caps }

func (h *harness) Nodes() []store.Store {
	if h.nodes != nil {
		return h.nodes
	}
	return []store.Store{h.st}
}

func (h *harness) Dial(ctx context.Context, addr string) (store.Store, func(), error) {
	if !h.caps.Proxy {
		return nil, nil, store.ErrNotSupported
	}
	return h.dial(ctx, addr)
}

func (h *harness) Advance(d time.Duration) {
	if h.mini != nil {
		h.mini.Advance(d)
		return
	}
	time.Sleep(d)
}

func (h *harness) Restart() error {
	if h.server == nil {
		return store.ErrNotSupported
	}
	return h.server.Restart()
}

func (h *harness) Close() {
	if h.closeSt != nil {
		h.closeSt()
	}
	if h.mini != nil {
		h.mini.Close()
	}
	if h.server != nil {
		_ = h.server.Close()
	}
}

func (h *harness) connect(ctx context.Context) error {
	st, closeFn, err := h.dial(ctx, h.addr)
	if err != nil {
		h.Close()
		return fmt.Errorf("conformance: dial %s: %w", h.addr, err)
	}
	h.st, h.closeSt = st, closeFn
	return nil
}

// Miniredis returns a HarnessMaker that runs each check on a fresh embedded
// miniredis whose clock only moves with Advance.
func Miniredis(d Dialer) HarnessMaker {
	return func(ctx context.Context, t testing.TB) (Harness, error) {
		m, err := redistest.StartMini()
		if err != nil {
			return nil, err
		}
		h := &harness{dial: d, addr: m.Addr(), mini: m, caps: Caps{VirtualClock: true, Private: true, Proxy: true}}
		return h, h.connect(ctx)
	}
}

// RedisServer returns a HarnessMaker that runs each check on a fresh
// redis-server on a free loopback port. Without a redis-server binary it
// skips, unless REQUIRE_REDIS=1, when it fails.
func RedisServer(d Dialer) HarnessMaker {
	return func(ctx context.Context, t testing.TB) (Harness, error) {
		s := redistest.StartServer(t)
		h := &harness{dial: d, addr: s.Addr(), server: s, caps: Caps{Restart: true, Private: true, Proxy: true}}
		return h, h.connect(ctx)
	}
}

// TLSDialer returns the Dialer of the adapter under test for a server that
// accepts only TLS, given the client TLS configuration to use.
type TLSDialer func(cfg *tls.Config) Dialer

// RedisServerTLS is RedisServer for a redis-server that accepts only TLS,
// with a CA, server and client certificates generated for each check; d
// receives a configuration that trusts the CA and presents the client
// certificate. Its fault proxy ends TLS with the server's certificate and
// speaks TLS to the server, so the fault checks run over TLS too.
func RedisServerTLS(d TLSDialer) HarnessMaker {
	return func(ctx context.Context, t testing.TB) (Harness, error) {
		s := redistest.StartTLSServer(t)
		h := &harness{dial: d(s.TLS().ClientConfig()), addr: s.Addr(), server: s, caps: Caps{Restart: true, Private: true, Proxy: true, TLS: true}}
		return h, h.connect(ctx)
	}
}

// RedisAt returns a HarnessMaker that runs each check on the Redis at addr,
// which the suite shares with others: it touches only keys under its own
// prefix, flushes nothing and restarts nothing.
func RedisAt(addr string, d Dialer) HarnessMaker {
	return func(ctx context.Context, t testing.TB) (Harness, error) {
		h := &harness{dial: d, addr: addr, caps: Caps{Proxy: true}}
		return h, h.connect(ctx)
	}
}

// RedisAtTLS is RedisAt for a Redis that accepts only TLS (d connects with
// TLS). The fault proxy checks are skipped: a proxy without the server's
// certificate cannot see the commands inside the TLS connection.
func RedisAtTLS(addr string, d Dialer) HarnessMaker {
	return func(ctx context.Context, t testing.TB) (Harness, error) {
		h := &harness{dial: d, addr: addr, caps: Caps{TLS: true}}
		return h, h.connect(ctx)
	}
}

// ClusterDialer connects a store of the adapter under test to the Redis
// Cluster whose masters are at addrs, and returns it with a func that closes
// it.
type ClusterDialer func(ctx context.Context, addrs []string) (st store.Store, closeFn func(), err error)

// RedisCluster starts a real three-master Redis Cluster for t (skipping
// without redis-server and redis-cli, unless REQUIRE_REDIS=1) and returns a
// HarnessMaker that runs each check on it with a store from cluster, under
// the check's own prefix. node connects a single-node store of the same
// adapter to each master, for scanning keys and flushing scripts. The fault
// proxy checks are skipped: a Cluster client would go around a proxy.
func RedisCluster(t testing.TB, cluster ClusterDialer, node Dialer) HarnessMaker {
	c := redistest.StartCluster(t)
	return clusterMaker(c.Addrs(), cluster, node, Caps{Private: true, Cluster: true})
}

// ClusterAt returns a HarnessMaker that runs each check on the Redis Cluster
// that the nodes at addrs belong to (one is enough), shared with others: the
// suite touches only keys under its own prefix and flushes nothing. Keys
// are scanned on every master, as CLUSTER NODES lists them: a check that
// scanned fewer would miss the keys written there (a leak would pass, and
// stay). When a listed master cannot be reached (a Cluster that announces
// addresses this host cannot reach), addrs are taken for the masters if
// they are as many, and the harness fails otherwise.
func ClusterAt(addrs []string, cluster ClusterDialer, node Dialer) HarnessMaker {
	return clusterMaker(addrs, cluster, node, Caps{Cluster: true})
}

func clusterMaker(addrs []string, cluster ClusterDialer, node Dialer, caps Caps) HarnessMaker {
	return func(ctx context.Context, _ testing.TB) (Harness, error) {
		st, closeSt, err := cluster(ctx, addrs)
		if err != nil {
			return nil, fmt.Errorf("conformance: dial cluster: %w", err)
		}
		h := &harness{st: st, closeSt: closeSt, addr: addrs[0], caps: caps}
		var closers []func()
		h.closeSt = func() {
			closeSt()
			for _, f := range closers {
				f()
			}
		}
		seed, closeSeed, err := node(ctx, addrs[0])
		if err != nil {
			h.Close()
			return nil, fmt.Errorf("conformance: dial cluster node %s: %w", addrs[0], err)
		}
		closers = append(closers, closeSeed)
		masters, err := ClusterMasters(ctx, seed, addrs[0])
		if err != nil {
			h.Close()
			return nil, err
		}
		var unreachable error
		for _, a := range masters {
			n, closeN, err := node(ctx, a)
			if err == nil {
				closers = append(closers, closeN)
				err = ping(ctx, n)
			}
			if err != nil {
				unreachable = fmt.Errorf("dial cluster master %s (listed by CLUSTER NODES): %w", a, err)
				break
			}
			h.nodes = append(h.nodes, n)
		}
		if unreachable != nil {
			// The Cluster announces addresses this host cannot reach
			// (behind NAT or in containers, without cluster-announce-ip):
			// the addresses given name the masters, when they are as many.
			if len(addrs) < len(masters) {
				h.Close()
				return nil, fmt.Errorf("conformance: %w; give every master's reachable address (%d masters), or set cluster-announce-ip", unreachable, len(masters))
			}
			h.nodes = nil
			for _, a := range addrs {
				n, closeN, err := node(ctx, a)
				if err != nil {
					h.Close()
					return nil, fmt.Errorf("conformance: dial cluster node %s: %w", a, err)
				}
				h.nodes = append(h.nodes, n)
				closers = append(closers, closeN)
			}
		}
		return h, nil
	}
}

// ping checks that n answers, within 2 s.
func ping(ctx context.Context, n store.Store) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	rs, err := n.Do(ctx, store.Cmd{Name: "PING"})
	if err == nil {
		err = rs[0].Err
	}
	return err
}

// ClusterMasters returns the addresses (host:port) of a Redis Cluster's
// masters, as CLUSTER NODES on node, one of its nodes dialed at addr,
// lists them: every master not marked failed or without an address. A
// node that lists itself without an IP (it has not learnt its own) is at
// addr's host.
func ClusterMasters(ctx context.Context, node store.Store, addr string) ([]string, error) {
	rs, err := node.Do(ctx, store.Cmd{Name: "CLUSTER", Args: []any{"NODES"}})
	if err == nil {
		err = rs[0].Err
	}
	var text string
	if err == nil {
		text, err = store.String(rs[0].Val)
	}
	if err != nil {
		return nil, fmt.Errorf("conformance: list the Cluster's masters (CLUSTER NODES on %s): %w", addr, err)
	}
	seedHost, _, _ := net.SplitHostPort(addr)
	var masters []string
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		flags := strings.Split(f[2], ",")
		if !slices.Contains(flags, "master") || slices.ContainsFunc(flags, func(fl string) bool {
			return fl == "fail" || fl == "fail?" || fl == "noaddr" || fl == "handshake"
		}) {
			continue
		}
		hostPort, _, _ := strings.Cut(f[1], "@") // ip:port@cport[,hostname]
		i := strings.LastIndexByte(hostPort, ':')
		if i < 0 {
			continue
		}
		host, port := strings.TrimSuffix(strings.TrimPrefix(hostPort[:i], "["), "]"), hostPort[i+1:]
		if host == "" {
			host = seedHost
		}
		masters = append(masters, net.JoinHostPort(host, port))
	}
	if len(masters) == 0 {
		return nil, fmt.Errorf("conformance: CLUSTER NODES on %s lists no master", addr)
	}
	slices.Sort(masters)
	return masters, nil
}
