package rueidis_test

import (
	"testing"

	"github.com/quotagate/limiter/internal/adaptertest"
	"github.com/quotagate/limiter/internal/redistest"
)

// A command that changes a connection's state (a lone MULTI, WATCH,
// SUBSCRIBE) is refused before it is sent, on one server and on a Cluster:
// rueidis shares its connections between concurrent calls, so a lone MULTI
// had theirs queued.
func TestConnCommandsRefused(t *testing.T) {
	t.Run("server", func(t *testing.T) {
		adaptertest.ConnCommands(t, newStore(t, redistest.StartServer(t).Addr(), nil))
	})
	t.Run("cluster", func(t *testing.T) {
		adaptertest.ConnCommands(t, newClusterStore(t, redistest.StartCluster(t).Addrs()))
	})
}
