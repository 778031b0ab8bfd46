package redigo_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
)

// TestDeadMasterIsARefusedConnection: a call on a slot whose master died
// fails as a refused connection, sent nowhere (errors.Is ECONNREFUSED, not
// ErrUnknownOutcome), as on go-redis and rueidis. redisc binds a call it
// cannot connect to its slot's master to another node, which answers
// MOVED back to the dead master: the call's error was that MOVED, the
// refused connection lost, after four round trips.
func TestDeadMasterIsARefusedConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cluster := redistest.StartCluster(t)
	st, closeSt, err := dialCluster(ctx, cluster.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer closeSt()
	key := "{dead}k"
	if _, err := st.Do(ctx, store.Cmd{Name: "SET", Args: []any{key, "1"}}); err != nil {
		t.Fatal(err)
	}
	dead, err := cluster.StopMasterOf(key)
	if err != nil {
		t.Fatal(err)
	}
	// The first call may go on a pooled connection to the dead master,
	// written before it broke: an unknown outcome.
	_, _ = st.Do(ctx, store.Cmd{Name: "GET", Args: []any{key}})
	for i := range 3 {
		rs, err := st.Do(ctx, store.Cmd{Name: "GET", Args: []any{key}})
		if !errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, store.ErrUnknownOutcome) {
			t.Errorf("call %d on a slot of %s, shut down: %v, %v; want a refused connection, not an unknown outcome", i+2, dead, rs, err)
		}
	}
}
