package rueidis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mna/redisc"
	"github.com/redis/rueidis"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	rueidisstore "github.com/quotagate/limiter/store/rueidis"
	"github.com/quotagate/limiter/strategy"
)

// unserve leaves slot without a node on the Cluster at addrs, which keeps
// serving the others (cluster-require-full-coverage no, a common
// production setting).
func unserve(t *testing.T, addrs []string, slot int) {
	t.Helper()
	nodes := make([]rueidis.Client, len(addrs))
	for i, a := range addrs {
		opt := options(a)
		opt.ForceSingleClient = true
		c, err := rueidis.NewClient(opt)
		if err != nil {
			t.Fatalf("node %s: %v", a, err)
		}
		defer c.Close()
		nodes[i] = c
	}
	ctx := context.Background()
	for _, c := range nodes {
		if err := c.Do(ctx, c.B().ConfigSet().ParameterValue().ParameterValue("cluster-require-full-coverage", "no").Build()).Error(); err != nil {
			t.Fatalf("CONFIG SET: %v", err)
		}
	}
	for _, c := range nodes {
		if err := c.Do(ctx, c.B().ClusterDelslots().Slot(int64(slot)).Build()).Error(); err != nil && !strings.Contains(err.Error(), "already unassigned") {
			t.Fatalf("CLUSTER DELSLOTS %d: %v", slot, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		settled := true
		for _, c := range nodes {
			info, err := c.Do(ctx, c.B().ClusterInfo().Build()).ToString()
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_assigned:16383") {
				settled = false
			}
		}
		if settled {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Cluster did not settle with slot %d unserved", slot)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestUnservedSlot: on a Cluster serving all slots but one, rueidis fails
// a whole pipeline, before sending it, when one of its commands has the
// unserved slot (rueidis.ErrNoSlot). A Batch decides the others and fails
// only those of that slot, and none of it is an unknown outcome (nothing
// was sent); AllowMany under FailOpen does not admit, uncounted, the asks
// beside one of that slot.
func TestUnservedSlot(t *testing.T) {
	cl := redistest.StartCluster(t)
	addrs := cl.Addrs()
	l := limiter.PerHour(1)
	bad, err := limiter.Key(limiter.DefaultPrefix, "bad", l)
	if err != nil {
		t.Fatal(err)
	}
	unserve(t, addrs, redisc.Slot(bad))
	opt := options(addrs[0])
	opt.InitAddress = addrs
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	st := rueidisstore.New(c)
	ctx := context.Background()

	const src = "return redis.call('INCR', KEYS[1])"
	rs := st.Batch(ctx, []store.Cmd{
		{Name: "EVAL", Args: []any{src, 1, "{good}k"}},
		{Name: "EVAL", Args: []any{src, 1, bad}},
		{Name: "EVAL", Args: []any{src, 1, "{other}k"}},
	})
	for i, key := range []string{"{good}k", "", "{other}k"} {
		if key == "" {
			continue
		}
		if n, err := store.Int64(rs[i].Val); rs[i].Err != nil || err != nil || n != 1 {
			t.Errorf("Batch: the command on %s, a served slot = %+v; want 1", key, rs[i])
		}
	}
	if rs[1].Err == nil || errors.Is(rs[1].Err, store.ErrUnknownOutcome) || !errors.Is(rs[1].Err, rueidis.ErrNoSlot) {
		t.Errorf("Batch: the command on the unserved slot = %+v; want rueidis.ErrNoSlot, not an unknown outcome", rs[1])
	}
	if _, err := st.Eval(ctx, src, []string{bad}, nil); err == nil || errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("Eval on the unserved slot: %v; want an error, not an unknown outcome", err)
	}

	lim, err := limiter.New(st, strategy.NewFixedWindow(), limiter.WithFailMode(limiter.FailOpen))
	if err != nil {
		t.Fatal(err)
	}
	var asks []limiter.Ask
	for i := range 5 {
		asks = append(asks, limiter.Ask{Key: fmt.Sprintf("good%d", i), Limits: []limiter.Limit{l}})
	}
	asks = append(asks, limiter.Ask{Key: "bad", Limits: []limiter.Limit{l}})
	for round := 1; round <= 2; round++ {
		for i, d := range lim.AllowMany(ctx, asks) {
			switch {
			case i == len(asks)-1:
				if !d.Result.Degraded {
					t.Errorf("round %d: the ask on the unserved slot = %+v, %v; want a degraded admission (FailOpen)", round, d.Result, d.Err)
				}
			case d.Err != nil || d.Result.Degraded || d.Result.Allowed != (round == 1):
				t.Errorf("round %d: %s at 1 per hour = %+v, %v; want decided by Redis, admitted in round 1 only", round, asks[i].Key, d.Result, d.Err)
			}
		}
	}
}
