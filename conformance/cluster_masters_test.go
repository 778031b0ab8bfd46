package conformance_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/store"
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
