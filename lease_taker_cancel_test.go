package limiter_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// hangFirst hangs its first command until that call's context ends
// (started is closed when it begins); later commands go to the store.
type hangFirst struct {
	store.Store
	mu      sync.Mutex
	n       int
	started chan struct{}
}

func (h *hangFirst) first(ctx context.Context) bool {
	h.mu.Lock()
	h.n++
	first := h.n == 1
	h.mu.Unlock()
	if first {
		close(h.started)
		<-ctx.Done()
	}
	return first
}

func (h *hangFirst) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	if h.first(ctx) {
		return nil, ctx.Err()
	}
	return h.Store.EvalSha(ctx, sha, keys, args)
}

func (h *hangFirst) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	if h.first(ctx) {
		return nil, ctx.Err()
	}
	return h.Store.Eval(ctx, src, keys, args)
}

func (h *hangFirst) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if h.first(ctx) {
		return nil, ctx.Err()
	}
	return h.Store.Do(ctx, cmds...)
}

// TestLeaseTakerCanceledIsNotSharedFailure: a caller waiting for the
// lease another caller is taking is not failed when the taker's own
// context is canceled (that is no outage): it takes the lease itself.
func TestLeaseTakerCanceledIsNotSharedFailure(t *testing.T) {
	_, st := newMini(t)
	h := &hangFirst{Store: st, started: make(chan struct{})}
	lim := newLimiter(t, h, limiter.WithQuotaLease(10))
	l := limiter.PerSecond(1000)
	takerCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = lim.Allow(takerCtx, "hot", l) }()
	<-h.started // the taker's lease call hangs
	type out struct {
		r   limiter.Result
		err error
	}
	done := make(chan out, 1)
	go func() { r, err := lim.Allow(context.Background(), "hot", l); done <- out{r, err} }()
	// Wait until the second caller waits for the lease being taken.
	for end := time.Now().Add(10 * time.Second); !waiting(); {
		if time.Now().After(end) {
			t.Fatal("the second caller never waited for the lease being taken")
		}
		runtime.Gosched()
	}
	cancel() // the taker gives up: its own context, not Redis
	o := <-done
	if o.err != nil || !o.r.Allowed || o.r.Degraded {
		t.Errorf("waiter after the taker's cancellation: %+v, %v; want admitted by Redis", o.r, o.err)
	}
}

// waiting reports a goroutine blocked in a select in decideLeased.
func waiting() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "[select]") && strings.Contains(g, "decideLeased") {
			return true
		}
	}
	return false
}
