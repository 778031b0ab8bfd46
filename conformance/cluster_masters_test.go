package conformance_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// nodesReply answers CLUSTER NODES with a fixed text.
type nodesReply struct {
	store.Store
	text string
	err  error
}

func (n nodesReply) Do(_ context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	return []store.Reply{{Val: n.text, Err: n.err}}, nil
}

// TestClusterMasters: the masters a check scans are every master the
// Cluster lists, not only the nodes given (a check given one seed node
// missed the keys written on the others: a leak passed, and stayed).
func TestClusterMasters(t *testing.T) {
	text := "" +
		"07c37dfeb235213a872192d90877d0cd55635b91 10.0.0.2:6379@16379 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected\n" +
		"67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 10.0.0.3:6379@16379,node-3.example master - 0 1426238316232 2 connected 5461-10922\n" +
		"292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f :6379@16379 myself,master - 0 0 1 connected 0-5460\n" +
		"6ec23923021cf3ffec47632106199cb7f496ce01 10.0.0.5:6379@16379 master,fail - 1426238316232 0 5 disconnected\n" +
		"824fe116063bc5fcf9f4ffd895bc17aee7731ac3 [::1]:6380@16380 master - 0 1426238318243 3 connected 10923-16383\n" +
		"e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca ::1:6381@16381 master,nofailover - 0 1426238318243 6 connected\n"
	got, err := conformance.ClusterMasters(context.Background(), nodesReply{text: text}, "10.0.0.1:6379")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.1:6379", "10.0.0.3:6379", "[::1]:6381", "[::1]:6380"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("ClusterMasters = %q; want %q", got, want)
	}
	refused := errors.New("ERR unknown command 'CLUSTER'")
	if _, err := conformance.ClusterMasters(context.Background(), nodesReply{err: refused}, "10.0.0.1:6379"); !errors.Is(err, refused) {
		t.Errorf("ClusterMasters on a refusal = %v; want the refusal", err)
	}
	if _, err := conformance.ClusterMasters(context.Background(), nodesReply{text: "x y slave\n"}, "10.0.0.1:6379"); err == nil {
		t.Errorf("ClusterMasters with no master listed = nil error")
	}
}

// TestClusterAtUnreachableAnnouncedAddresses: a Cluster that announces
// addresses this host cannot reach (containers, NAT, no
// cluster-announce-ip) is checked through the addresses given, when they
// name every master; given fewer, the harness fails saying so.
func TestClusterAtUnreachableAnnouncedAddresses(t *testing.T) {
	c := redistest.StartCluster(t)
	announced := map[string]bool{}
	var given []string // a proxy per master: the addresses the host reaches
	for _, a := range c.Addrs() {
		announced[a] = true
		given = append(given, redistest.NewProxy(t, a).Addr())
	}
	node := func(ctx context.Context, addr string) (store.Store, func(), error) {
		if announced[addr] {
			addr = "127.0.0.1:1" // unreachable from here
		}
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		return goredis.New(rdb), func() { _ = rdb.Close() }, nil
	}
	cluster := func(ctx context.Context, addrs []string) (store.Store, func(), error) {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRetries: -1})
		return goredis.New(rdb), func() { _ = rdb.Close() }, nil
	}
	ctx := context.Background()
	h, err := conformance.ClusterAt(given, cluster, node)(ctx, t)
	if err != nil {
		t.Fatalf("every master given: %v", err)
	}
	if n := len(h.Nodes()); n != len(given) {
		t.Errorf("every master given: %d nodes scanned; want %d", n, len(given))
	}
	h.Close()
	if h, err := conformance.ClusterAt(given[:1], cluster, node)(ctx, t); err == nil || !strings.Contains(err.Error(), "cluster-announce-ip") {
		if h != nil {
			h.Close()
		}
		t.Errorf("one of %d masters given, the others unreachable: %v; want an error naming cluster-announce-ip", len(given), err)
	}
}
