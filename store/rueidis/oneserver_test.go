package rueidis_test

import (
	"testing"

	"github.com/redis/rueidis"

	"github.com/quotagate/limiter/internal/adaptertest"
	"github.com/quotagate/limiter/internal/redistest"
	rueidisstore "github.com/quotagate/limiter/store/rueidis"
)

// TestOneServer: a Store on a single-server client says that one server
// holds every key, and AllowMany sends one script call for 8 asks; with
// WithShardingProxy it says not, and sends one per ask, as it does on a
// Cluster client.
func TestOneServer(t *testing.T) {
	addr := redistest.StartServer(t).Addr()
	single := newStore(t, addr, nil)
	adaptertest.AllowManyCalls(t, single, true)
	adaptertest.AllowManyCalls(t, rueidisstore.New(single.Client(), rueidisstore.WithShardingProxy()), false)

	cl := redistest.StartCluster(t)
	opt := options(cl.Addrs()[0])
	opt.InitAddress = cl.Addrs()
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if rueidisstore.New(c).OneServer() {
		t.Error("a Store on a Cluster client says one server holds every key")
	}
}
