package conformance

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/conformance/knownbad"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// TestUnservedSlotFailsPipelineFailsWhole: UnservedSlot fails a store whose
// Batch takes one command's error for every command's (the served ones'
// included, as unknown outcomes), and passes the same store without it.
func TestUnservedSlotFailsPipelineFailsWhole(t *testing.T) {
	node := func(_ context.Context, addr string) (store.Store, func(), error) {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		return goredis.New(rdb), func() { _ = rdb.Close() }, nil
	}
	cluster := func(wrap func(store.Store) store.Store) ClusterDialer {
		return func(_ context.Context, addrs []string) (store.Store, func(), error) {
			rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
			return wrap(goredis.New(rdb)), func() { _ = rdb.Close() }, nil
		}
	}
	same := func(st store.Store) store.Store { return st }
	for _, tc := range []struct {
		name string
		wrap func(store.Store) store.Store
		pass bool
	}{{"goredis", same, true}, {"PipelineFailsWhole", knownbad.PipelineFailsWhole, false}} {
		o := record(context.Background(), func(r testing.TB) { UnservedSlot(r, cluster(tc.wrap), node) })
		msgs := strings.Join(o.Messages, " | ")
		if o.Skipped {
			t.Fatalf("%s: skipped: %s", tc.name, msgs)
		}
		if o.Passed != tc.pass {
			t.Errorf("%s: passed=%v, want %v: %s", tc.name, o.Passed, tc.pass, msgs)
		}
		if !tc.pass && (!strings.Contains(msgs, "its own reply: its slot is served") || !strings.Contains(msgs, "want decided by Redis")) {
			t.Errorf("%s: failed without saying that the served commands and asks failed: %s", tc.name, msgs)
		}
	}
}
