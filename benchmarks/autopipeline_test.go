package benchmarks

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// TestAutoPipelineNewerGoRedis runs the checks of single decisions through
// go-redis's AutoPipeliner with the go-redis this module requires, newer
// than the limiter module's: from v9.23 the AutoPipeliner marshals every
// argument once to estimate a batch's size before it writes it, which the
// adapter's write-once argument must not take for a second write (every
// decision failed as an unknown outcome), while a replayed batch must still
// not run a decision twice (lost-reply-counted-once).
func TestAutoPipelineNewerGoRedis(t *testing.T) {
	dials := map[string]conformance.Dialer{
		"with": func(_ context.Context, addr string) (store.Store, func(), error) {
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			return goredis.New(rdb, goredis.WithAutoPipeline()), func() { _ = rdb.Close() }, nil
		},
		"as-client": func(_ context.Context, addr string) (store.Store, func(), error) {
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			ap, err := rdb.AutoPipeline()
			if err != nil {
				_ = rdb.Close()
				return nil, nil, err
			}
			return goredis.New(ap), func() { _ = rdb.Close() }, nil
		},
	}
	var checks []conformance.Check
	for _, name := range []string{"exact-admission", "weighted-costs", "contention-never-admits", "bounded-ttls", "noscript-invisible", "lost-reply-counted-once", "slow-reply-past-deadline", "no-accidental-fail-open"} {
		ch, ok := conformance.CheckByName(name)
		if !ok {
			t.Fatalf("no check %s", name)
		}
		checks = append(checks, ch)
	}
	for name, dial := range dials {
		mk := conformance.RedisServer(dial)
		for _, spec := range []conformance.Spec{conformance.FixedWindow(), conformance.GCRA()} {
			for _, ch := range checks {
				t.Run(name+"/"+spec.Name+"/"+ch.Name, func(t *testing.T) { conformance.RunCheck(t, mk, spec, ch) })
			}
		}
	}
}
