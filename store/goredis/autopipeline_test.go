package goredis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// TestAutoPipelineDeadline: against a blackholed server, a script call
// with a 100 ms deadline through an AutoPipeliner returns at about its
// deadline with store.ErrUnknownOutcome (it may have been written): with
// the client's AutoPipeliner (WithAutoPipeline), and with a deferred one
// (AsyncAutoPipeline) given to New, whose Process returns once the call is
// queued (it returned after 10 s, the client's read timeout).
func TestAutoPipelineDeadline(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(rdb *redis.Client) (store.Store, error)
	}{
		{"with", func(rdb *redis.Client) (store.Store, error) {
			return goredis.New(rdb, goredis.WithAutoPipeline()), nil
		}},
		{"async-as-client", func(rdb *redis.Client) (store.Store, error) {
			ap, err := rdb.AsyncAutoPipeline()
			return goredis.New(ap), err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := redistest.NewMini(t)
			p := redistest.NewProxy(t, m.Addr())
			rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
			t.Cleanup(func() { _ = rdb.Close() })
			st, err := tc.store(rdb)
			if err != nil {
				t.Fatal(err)
			}
			if v, err := st.Eval(context.Background(), "return 1", nil, nil); err != nil || v != int64(1) {
				t.Fatalf("warm-up Eval = %v, %v", v, err)
			}
			p.Blackhole(true)
			// (closing the proxy first fails the read the client's Close
			// would wait for: go-redis's AutoPipeliner drains its batch in
			// flight for up to 30 s)
			t.Cleanup(func() { _ = p.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err = st.Eval(ctx, "return redis.call('INCR', KEYS[1])", []string{"k"}, nil)
			// (2 s: a busy machine's scheduling, far below the 10 s the
			// client's own timeouts take)
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("Eval with a 100ms deadline on a blackholed server returned after %v; want about 100ms", took.Round(time.Millisecond))
			}
			if !errors.Is(err, store.ErrUnknownOutcome) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v; want store.ErrUnknownOutcome and context.DeadlineExceeded", err)
			}
		})
	}
}

// TestAutoPipelineRefused: a client whose AutoPipeliner cannot be made (its
// options ask for parallel batches without giving up order) makes every
// script call of the Store an error that says so, never a silent client
// without auto-pipelining; nothing is sent.
func TestAutoPipelineRefused(t *testing.T) {
	m := redistest.NewMini(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), AutoPipelineOptions: &redis.AutoPipelineOptions{MaxConcurrentBatches: 2}})
	t.Cleanup(func() { _ = rdb.Close() })
	st := goredis.New(rdb, goredis.WithAutoPipeline())
	_, err := st.Eval(context.Background(), "return redis.call('INCR', KEYS[1])", []string{"k"}, nil)
	if err == nil || !strings.Contains(err.Error(), "auto-pipeline") || errors.Is(err, store.ErrUnknownOutcome) {
		t.Fatalf("Eval = %v; want the AutoPipeliner's refusal, not an unknown outcome", err)
	}
	if got, _ := m.Get("k"); got != "" {
		t.Errorf("k = %q after the refused call; want nothing written", got)
	}
}
