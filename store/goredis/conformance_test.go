package goredis_test

import (
	"context"
	"crypto/tls"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/internal/adaptertest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// dial uses go-redis's default options on purpose: MaxRetries is 3, so the
// lost-reply check proves the adapter's guard, not a retry-free client.
func dial(_ context.Context, addr string) (store.Store, func(), error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	return goredis.New(rdb), func() { _ = rdb.Close() }, nil
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

// TestConformanceRecommendedOptions runs the checks of deadlines and
// faults with the options the package documentation recommends:
// ContextTimeoutEnabled, so that go-redis itself ends a call at its
// context's deadline (the adapter's own bound steps aside), and no retries.
func TestConformanceRecommendedOptions(t *testing.T) {
	t.Parallel()
	dialRecommended := func(_ context.Context, addr string) (store.Store, func(), error) {
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true})
		return goredis.New(rdb), func() { _ = rdb.Close() }, nil
	}
	runChecks(t, map[string]conformance.HarnessMaker{"miniredis": conformance.Miniredis(dialRecommended), "redis-server": conformance.RedisServer(dialRecommended)},
		conformance.StorePaths(), "crash-between-commands", "lost-reply-counted-once", "slow-reply-past-deadline", "redis-down-or-blackholed", "no-accidental-fail-open")
}

// runChecks runs the named checks of specs on each backend.
func runChecks(t *testing.T, backends map[string]conformance.HarnessMaker, specs []conformance.Spec, names ...string) {
	t.Helper()
	var checks []conformance.Check
	for _, name := range names {
		ch, ok := conformance.CheckByName(name)
		if !ok {
			t.Fatalf("no check %s", name)
		}
		checks = append(checks, ch)
	}
	for name, mk := range backends {
		t.Run(name, func(t *testing.T) {
			for _, spec := range specs {
				for _, ch := range checks {
					t.Run(spec.Name+"/"+ch.Name, func(t *testing.T) { conformance.RunCheck(t, mk, spec, ch) })
				}
			}
		})
	}
}

// autoPipelineChecks are the checks of single decisions that the
// AutoPipeliner's shared round trips could break: exact counts under
// contention, TTLs, a decision sent once, deadlines and faults.
var autoPipelineChecks = []string{
	"exact-admission", "weighted-costs", "multi-rule-all-or-nothing", "contention-never-admits",
	"leak-under-load", "bounded-ttls", "noscript-invisible", "crash-between-commands",
	"lost-reply-counted-once", "slow-reply-past-deadline", "redis-down-or-blackholed", "no-accidental-fail-open",
}

// TestConformanceAutoPipeline runs autoPipelineChecks with single
// decisions auto-pipelined (WithAutoPipeline; the client's default
// options, so MaxRetries 3), on redis-server and on the Cluster, for the
// store paths and GCRA; and with the AutoPipeliner given to New itself.
func TestConformanceAutoPipeline(t *testing.T) {
	t.Parallel()
	withAP := func(_ context.Context, addr string) (store.Store, func(), error) {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		return goredis.New(rdb, goredis.WithAutoPipeline()), func() { _ = rdb.Close() }, nil
	}
	apAsClient := func(_ context.Context, addr string) (store.Store, func(), error) {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		ap, err := rdb.AutoPipeline()
		if err != nil {
			_ = rdb.Close()
			return nil, nil, err
		}
		return goredis.New(ap), func() { _ = rdb.Close() }, nil
	}
	withAPCluster := func(_ context.Context, addrs []string) (store.Store, func(), error) {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		return goredis.New(rdb, goredis.WithAutoPipeline()), func() { _ = rdb.Close() }, nil
	}
	specs := append(conformance.StorePaths(), conformance.GCRA())
	t.Run("with", func(t *testing.T) {
		t.Parallel()
		runChecks(t, map[string]conformance.HarnessMaker{"redis-server": conformance.RedisServer(withAP)}, specs, autoPipelineChecks...)
	})
	t.Run("as-client", func(t *testing.T) {
		t.Parallel()
		runChecks(t, map[string]conformance.HarnessMaker{"redis-server": conformance.RedisServer(apAsClient)}, conformance.StorePaths()[:1], autoPipelineChecks...)
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		runChecks(t, map[string]conformance.HarnessMaker{"cluster": conformance.RedisCluster(t, withAPCluster, withAP)}, specs, autoPipelineChecks...)
	})
}

func dialCluster(_ context.Context, addrs []string) (store.Store, func(), error) {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	return goredis.New(rdb), func() { _ = rdb.Close() }, nil
}

// TestKnownBadOnCluster runs, on the real Cluster, the controls whose
// checks take a Cluster-specific path there (the script cache counted per
// node, not through a proxy; CLUSTER KEYSLOT): each must fail them.
func TestKnownBadOnCluster(t *testing.T) {
	mk := conformance.RedisCluster(t, dialCluster, dial)
	want := map[string]bool{"InlinedLimits": true, "UntaggedKeys": true}
	for _, ctl := range conformance.KnownBad() {
		if !want[ctl.Spec.Name] {
			continue
		}
		delete(want, ctl.Spec.Name)
		for _, o := range conformance.RunControl(context.Background(), mk, ctl, nil) {
			if o.Passed || o.Skipped {
				t.Errorf("%s on a Cluster: %s passed (skipped=%v); it must fail", ctl.Spec.Name, o.Check, o.Skipped)
				continue
			}
			t.Logf("%s on a Cluster: %s failed as it must: %v", ctl.Spec.Name, o.Check, o.Messages)
		}
	}
	for name := range want {
		t.Errorf("no control %s", name)
	}
}

// TestConformanceTLS runs the core and fault checks on a TLS-only server.
func TestConformanceTLS(t *testing.T) { adaptertest.ConformanceTLS(t, dialTLS) }

// dialTLS connects a store over TLS with cfg.
func dialTLS(cfg *tls.Config) conformance.Dialer {
	return func(_ context.Context, addr string) (store.Store, func(), error) {
		rdb := redis.NewClient(&redis.Options{Addr: addr, Dialer: goredis.TLSDialer(nil, cfg)})
		return goredis.New(rdb), func() { _ = rdb.Close() }, nil
	}
}

// TestManySubjects: 100 000 subjects leave no key after their window and
// no growth of the client's heap.
func TestManySubjects(t *testing.T) { adaptertest.ManySubjects(t, dial) }

// TestQuotaLeases runs the checks of admission with quota leases on, on
// the virtual clock and on a real one (a lease lives in the process: the
// Cluster adds nothing to prove).
func TestQuotaLeases(t *testing.T) {
	adaptertest.QuotaLeases(t, map[string]conformance.HarnessMaker{
		"miniredis":    conformance.Miniredis(dial),
		"redis-server": conformance.RedisServer(dial),
	})
}

// TestConformanceSharing runs autoPipelineChecks where the choice of
// shared pipelines matters: on the Cluster with ContextTimeoutEnabled,
// where calls share pipelines per master (with go-redis's defaults a
// ClusterClient's calls go alone: TestConformance), and on redis-server
// with sharing off (WithSharedPipelines(0)), each call on its own
// connection.
func TestConformanceSharing(t *testing.T) {
	t.Parallel()
	specs := append(conformance.StorePaths(), conformance.GCRA())
	sharedCluster := func(_ context.Context, addrs []string) (store.Store, func(), error) {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
		return goredis.New(rdb), func() { _ = rdb.Close() }, nil
	}
	sharedSingle := func(_ context.Context, addr string) (store.Store, func(), error) {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		return goredis.New(rdb), func() { _ = rdb.Close() }, nil
	}
	unshared := func(_ context.Context, addr string) (store.Store, func(), error) {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		return goredis.New(rdb, goredis.WithSharedPipelines(0)), func() { _ = rdb.Close() }, nil
	}
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		runChecks(t, map[string]conformance.HarnessMaker{"cluster": conformance.RedisCluster(t, sharedCluster, sharedSingle)}, specs, autoPipelineChecks...)
	})
	t.Run("unshared", func(t *testing.T) {
		t.Parallel()
		runChecks(t, map[string]conformance.HarnessMaker{"redis-server": conformance.RedisServer(unshared)}, specs, autoPipelineChecks...)
	})
}

// TestUnservedSlot: a Cluster slot without a node fails only its own
// commands of a Batch, and AllowMany decides the asks beside it.
func TestUnservedSlot(t *testing.T) { conformance.UnservedSlot(t, dialCluster, dial) }

// TestMigratingSlot: decisions stay exact while a Cluster slot moves
// (ASK, MOVED), one by one and in an AllowMany.
func TestMigratingSlot(t *testing.T) { conformance.MigratingSlot(t, dialCluster, dial) }

// TestFailingOver: decisions stay exact while a Cluster master fails over
// to a replica that joined after the store read the slot map.
func TestFailingOver(t *testing.T) { conformance.FailingOver(t, dialCluster, dial) }
