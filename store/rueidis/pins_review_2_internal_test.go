package rueidis

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	rd "github.com/redis/rueidis"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
)

// watchHook is a dedicated connection whose first WATCH, once armed,
// cancels the Watch's context and waits for gate before it is sent: the
// WATCH then succeeds after Watch has returned at its context.
type watchHook struct {
	rd.DedicatedClient
	armed  *atomic.Bool
	cancel context.CancelFunc
	gate   chan struct{}
}

func (h *watchHook) Do(ctx context.Context, cmd rd.Completed) rd.RedisResult {
	if cs := cmd.Commands(); len(cs) > 0 && cs[0] == "WATCH" && h.armed.CompareAndSwap(true, false) {
		h.cancel()
		<-h.gate
		ctx = context.Background()
	}
	return h.DedicatedClient.Do(ctx, cmd)
}

// TestWatchSucceededAfterGivingUpIsReleased: Watch gave up at its
// context (store.ErrUnknownOutcome) while its WATCH was on its way; the
// WATCH then succeeded. The connection, the only one of the client's pool
// (BlockingPoolSize 1), must still be un-watched and released in the
// background: the next Watch gets it and its transaction commits, though
// the key watched by the given-up Watch has changed. (Without it, the
// next Watch waits for a pool slot that is never freed.)
func TestWatchSucceededAfterGivingUpIsReleased(t *testing.T) {
	m := redistest.NewMini(t)
	c, err := rd.NewClient(rd.ClientOption{
		InitAddress: []string{m.Addr()}, DisableCache: true, AlwaysPipelining: true,
		PipelineMultiplex: -1, ForceSingleClient: true, BlockingPoolSize: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	st := New(c)
	t.Cleanup(st.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var armed atomic.Bool
	gate := make(chan struct{})
	st.idle.dedicate = func() (rd.DedicatedClient, func()) {
		dc, release := c.Dedicate()
		return &watchHook{DedicatedClient: dc, armed: &armed, cancel: cancel, gate: gate}, release
	}
	bg := context.Background()
	if _, err := st.Do(bg, store.Cmd{Name: "SET", Args: []any{"k", "1"}}); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	called := false
	err = st.Watch(ctx, []string{"k"}, func(store.Tx) error { called = true; return nil })
	if !errors.Is(err, context.Canceled) || !errors.Is(err, store.ErrUnknownOutcome) || called {
		t.Fatalf("Watch given up at its context = %v (fn called: %v); want Canceled and ErrUnknownOutcome, fn not called", err, called)
	}
	close(gate) // the WATCH of k goes now, and succeeds
	if _, err := st.Do(bg, store.Cmd{Name: "SET", Args: []any{"k", "changed"}}); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(bg, 5*time.Second)
	defer cancel2()
	err = st.Watch(ctx2, []string{"fresh"}, func(tx store.Tx) error {
		_, err := tx.Exec(ctx2, store.Cmd{Name: "SET", Args: []any{"fresh", "v"}})
		return err
	})
	if err != nil {
		t.Errorf("the next Watch, on a pool of 1, after one given up whose WATCH then succeeded = %v; want committed (the connection was neither released nor un-watched)", err)
	}
}
