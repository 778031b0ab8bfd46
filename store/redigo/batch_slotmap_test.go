package redigo_test

import (
	"context"
	"testing"

	"github.com/mna/redisc"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/redigo"
)

// Batch reads a Cluster's slot map (CLUSTER SLOTS) again after a call met
// a MOVED: the Batches after the one that met it go to the slot's new
// node, and the old node refuses nothing more. (Do follows the MOVED
// itself, and the map was not read again: every later Batch sent the
// moved slot to its old node and took a MOVED and a round trip more.)
func TestBatchReadsSlotsAgainAfterARedirection(t *testing.T) {
	cl := redistest.StartCluster(t)
	addrs := cl.Addrs()
	st := redigo.New(redigo.Cluster(newCluster(t, addrs)))
	ctx := context.Background()
	stay := "{stay}k"
	from := owner(t, addrs, stay)
	var moving string
	for i := 0; ; i++ {
		moving = "{mv" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + "}k"
		if owner(t, addrs, moving) == from {
			break
		}
	}
	batch := func() {
		t.Helper()
		for i, r := range st.Batch(ctx, []store.Cmd{
			{Name: "GET", Args: []any{stay}},
			{Name: "GET", Args: []any{moving}},
		}) {
			if r.Err != store.ErrNil {
				t.Fatalf("command %d: %+v; want ErrNil", i, r)
			}
		}
	}
	batch() // reads the slot map
	to := (from + 1) % len(addrs)
	moveSlot(t, addrs, int(redisc.Slot(moving)), from, to)
	before := refusals(t, addrs[from])["MOVED"]
	batch() // meets the MOVED
	met := refusals(t, addrs[from])["MOVED"]
	if met == before {
		t.Fatal("the Batch after the move met no MOVED: the test did not exercise a redirection")
	}
	batch()
	batch()
	if n := refusals(t, addrs[from])["MOVED"] - met; n != 0 {
		t.Errorf("the old node refused %d commands of the Batches after the one that met the MOVED; want 0 (the slot map read again)", n)
	}
}
