package rueidis_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/rueidis"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	rueidisstore "github.com/quotagate/limiter/store/rueidis"
)

// TestClusterDoMixedSlots: a call that breaks the one-slot rule with
// keyless commands beside keys of two slots is an error, with nothing
// sent; rueidis panics on such a DoMulti ("Mixing no-slot and cross slot
// commands"), which Do handed it, ending the process.
func TestClusterDoMixedSlots(t *testing.T) {
	cl := redistest.StartCluster(t)
	addrs := cl.Addrs()
	opt := options(addrs[0])
	opt.InitAddress = addrs
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	st := rueidisstore.New(c)
	var rs []store.Reply
	panicked := func() (p any) {
		defer func() { p = recover() }()
		rs, err = st.Do(context.Background(),
			store.Cmd{Name: "MULTI"},
			store.Cmd{Name: "INCR", Args: []any{"{a}n"}},
			store.Cmd{Name: "INCR", Args: []any{"{b}n"}},
			store.Cmd{Name: "EXEC"})
		return nil
	}()
	if panicked != nil {
		t.Fatalf("Store.Do of a keyless command with keys of two slots panicked: %v", panicked)
	}
	if err == nil {
		t.Errorf("Store.Do of MULTI, INCR {a}, INCR {b}, EXEC on a Cluster = %v; want an error", fmt.Sprint(rs))
	}
	for _, k := range []string{"{a}n", "{b}n"} {
		if r, err := st.Do(context.Background(), store.Cmd{Name: "EXISTS", Args: []any{k}}); err != nil || r[0].Val != int64(0) {
			t.Errorf("EXISTS %s = %v, %v; want 0: nothing of the refused call may run", k, r, err)
		}
	}
}
