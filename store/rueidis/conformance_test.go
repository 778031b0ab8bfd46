package rueidis_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/internal/adaptertest"
	"github.com/quotagate/limiter/store"
	rueidisstore "github.com/quotagate/limiter/store/rueidis"
)

// options are the client options the package documents. Retries are left
// at rueidis's default (on), so the lost-reply check proves that a default
// client never re-sends a written EVALSHA.
func options(addr string) rueidis.ClientOption {
	return rueidis.ClientOption{
		InitAddress:       []string{addr},
		DisableCache:      true,
		AlwaysPipelining:  true,
		PipelineMultiplex: -1,
		Dialer:            net.Dialer{KeepAlive: -1, KeepAliveConfig: net.KeepAliveConfig{Enable: true}},
	}
}

// dialTimeout bounds the suite's connecting: rueidis connects in
// NewClient, within 5 s by default, which a loaded machine's miniredis has
// missed.
const dialTimeout = 30 * time.Second

// dial connects a Store with the documented options for a single server,
// ForceSingleClient included: without it rueidis probes the server with
// CLUSTER SLOTS when it connects, and miniredis answers it, so that the
// client would take it for a Cluster and go around the suite's fault proxy.
var dial = dialWith(func(*rueidis.ClientOption) {})

// dialWith is dial with the options changed by change.
func dialWith(change func(*rueidis.ClientOption)) conformance.Dialer {
	return func(_ context.Context, addr string) (store.Store, func(), error) {
		opt := options(addr)
		opt.ForceSingleClient = true
		opt.Dialer.Timeout = dialTimeout
		change(&opt)
		c, err := rueidis.NewClient(opt)
		if err != nil {
			return nil, nil, err
		}
		st := rueidisstore.New(c)
		return st, func() { st.Close(); c.Close() }, nil
	}
}

// TestConformance runs the store checks and every check of every strategy
// on miniredis, on redis-server and on a Cluster. The three run in
// parallel: each check has a server of its own, or, on the shared Cluster,
// keys of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	t.Run("miniredis", func(t *testing.T) {
		t.Parallel()
		conformance.RunStoreTests(t, conformance.Miniredis(dial))
	})
	t.Run("redis-server", func(t *testing.T) {
		t.Parallel()
		conformance.RunStoreTests(t, conformance.RedisServer(dial))
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		conformance.RunStoreTests(t, conformance.RedisCluster(t, dialCluster, dial))
	})
}

// dialCluster connects a Cluster client: every master as an init address,
// no ForceSingleClient.
func dialCluster(_ context.Context, addrs []string) (store.Store, func(), error) {
	opt := options(addrs[0])
	opt.InitAddress = addrs
	opt.Dialer.Timeout = dialTimeout
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, nil, err
	}
	st := rueidisstore.New(c)
	return st, func() { st.Close(); c.Close() }, nil
}

// TestConformanceTLS runs the core and fault checks on a TLS-only server.
func TestConformanceTLS(t *testing.T) { adaptertest.ConformanceTLS(t, dialTLS) }

// dialTLS connects a store over TLS with cfg.
func dialTLS(cfg *tls.Config) conformance.Dialer {
	return dialWith(func(opt *rueidis.ClientOption) { opt.TLSConfig = cfg })
}

// TestManySubjects: 100 000 subjects leave no key after their window and
// no growth of the client's heap.
func TestManySubjects(t *testing.T) { adaptertest.ManySubjects(t, dial) }

// TestQuotaLeases runs the checks of admission with quota leases on, on a
// redis-server. A lease lives in the Limiter, whatever the adapter: the
// virtual clock's runs are in the go-redis and redigo packages' tests
// (this package's, the longest, keeps to the real server), and a Cluster
// adds nothing to prove.
func TestQuotaLeases(t *testing.T) {
	adaptertest.QuotaLeases(t, map[string]conformance.HarnessMaker{
		"redis-server": conformance.RedisServer(dial),
	})
}

// TestMigratingSlot: decisions stay exact while a Cluster slot moves
// (ASK, MOVED), one by one and in an AllowMany.
func TestMigratingSlot(t *testing.T) { conformance.MigratingSlot(t, dialCluster, dial) }

// TestFailingOver: decisions stay exact while a Cluster master fails over
// to a replica that joined after the store read the slot map.
func TestFailingOver(t *testing.T) { conformance.FailingOver(t, dialCluster, dial) }
