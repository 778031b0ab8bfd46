package goredis_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// TestAutoPipelineSealedCallFailsAlone: with WithAutoPipeline, caller A
// (100 ms deadline) and caller B (5 s deadline) queue while an earlier
// batch holds the AutoPipeliner (a 400 ms reply). A gives up before its
// batch goes out: its command must not run, and must fail alone. B's must
// be answered. A's sealed guard failed the whole batch's write: B failed
// too, as an unknown outcome when it was queued first.
func TestAutoPipelineSealedCallFailsAlone(t *testing.T) {
	for _, bFirst := range []bool{false, true} {
		name := "A-then-B"
		if bFirst {
			name = "B-then-A"
		}
		t.Run(name, func(t *testing.T) {
			s := redistest.StartServer(t)
			p := redistest.NewProxy(t, s.Addr())
			rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = rdb.Close() })
			st := goredis.New(rdb, goredis.WithAutoPipeline())
			const incr = "return redis.call('INCR', KEYS[1])"
			if _, err := st.Eval(context.Background(), incr, []string{"warm"}, nil); err != nil {
				t.Fatal(err)
			}
			p.Delay(400 * time.Millisecond)
			defer p.Delay(0)
			var wg sync.WaitGroup
			wg.Go(func() { // C: holds the permit for 400 ms
				_, _ = st.Eval(context.Background(), incr, []string{"c"}, nil)
			})
			time.Sleep(50 * time.Millisecond)
			var errA, errB error
			a := func() {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				_, errA = st.Eval(ctx, incr, []string{"a"}, nil)
			}
			b := func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_, errB = st.Eval(ctx, incr, []string{"b"}, nil)
			}
			first, second := a, b
			if bFirst {
				first, second = b, a
			}
			wg.Go(first)
			time.Sleep(10 * time.Millisecond)
			wg.Go(second)
			wg.Wait()
			p.Delay(0)
			n, _ := rdb.Get(context.Background(), "b").Int()
			t.Logf("A (100ms deadline): %v", errA)
			if errA == nil || errors.Is(errA, store.ErrUnknownOutcome) {
				t.Errorf("A, given up before its batch went out: %v; want its deadline, a known outcome", errA)
			}
			if ex, _ := rdb.Exists(context.Background(), "a").Result(); ex != 0 {
				t.Errorf("A's command ran after A gave up on it (its key exists)")
			}
			if errB != nil {
				t.Errorf("B (5s deadline, healthy server) failed: %v (unknown outcome: %v; b's counter: %d); want its INCR's reply: A's deadline is not B's",
					errB, errors.Is(errB, store.ErrUnknownOutcome), n)
			}
		})
	}
}
