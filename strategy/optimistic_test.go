package strategy_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// noWatcher hides the wrapped store's Watcher.
type noWatcher struct{ store.Store }

func TestOptimisticNeedsAWatcher(t *testing.T) {
	_, st := newMini(t)
	_, err := limiter.New(noWatcher{st}, strategy.NewOptimistic())
	for _, want := range []error{limiter.ErrUnsuitableStore, strategy.ErrNoWatcher, store.ErrNotSupported} {
		if !errors.Is(err, want) {
			t.Errorf("limiter.New on a store without Watcher = %v; want an error wrapping %v", err, want)
		}
	}
	if _, err := limiter.New(st, strategy.NewOptimistic()); err != nil {
		t.Errorf("limiter.New on the go-redis store: %v", err)
	}
	// Called directly, Decide says the same.
	_, err = strategy.NewOptimistic().Decide(context.Background(), noWatcher{st}, limiter.Request{
		Keys: []string{"k"}, Limits: []limiter.Limit{limiter.PerMinute(1)}, Cost: 1})
	if !errors.Is(err, strategy.ErrNoWatcher) {
		t.Errorf("Decide on a store without Watcher = %v", err)
	}
}

// scripted wraps a Watcher: it counts transactions, and Exec returns err
// instead of running when err is set.
type scripted struct {
	store.Store
	w       store.Watcher
	watches atomic.Int64
	execs   atomic.Int64
	reads   atomic.Int64
	err     error
}

func (s *scripted) Watch(ctx context.Context, keys []string, fn func(store.Tx) error) error {
	s.watches.Add(1)
	return s.w.Watch(ctx, keys, func(tx store.Tx) error { return fn(scriptedTx{tx, s}) })
}

type scriptedTx struct {
	store.Tx
	s *scripted
}

func (t scriptedTx) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	t.s.reads.Add(1)
	return t.Tx.Do(ctx, cmds...)
}

func (t scriptedTx) Exec(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	t.s.execs.Add(1)
	if t.s.err != nil {
		return nil, t.s.err
	}
	return t.Tx.Exec(ctx, cmds...)
}

func newScripted(t *testing.T, err error) (*redistest.Mini, *scripted) {
	t.Helper()
	m, st := newMini(t)
	return m, &scripted{Store: st, w: st.(store.Watcher), err: err}
}

// TestOptimisticRetries: an aborted EXEC is retried up to the bound, then
// ErrContention; a lost EXEC reply is never retried; a context ending in
// the backoff ends the retries.
func TestOptimisticRetries(t *testing.T) {
	ctx := context.Background()
	l := limiter.PerMinute(5)

	m, st := newScripted(t, store.ErrTxAborted)
	lim := newLim(t, st, strategy.NewOptimistic(strategy.WithMaxAttempts(5), strategy.WithBackoff(time.Microsecond, time.Millisecond)))
	_, err := lim.Allow(ctx, "u", l)
	if !errors.Is(err, limiter.ErrContention) {
		t.Errorf("always aborted = %v; want ErrContention", err)
	}
	if n := st.watches.Load(); n != 5 {
		t.Errorf("%d transactions, want 5", n)
	}
	if ks := m.Keys(); len(ks) != 0 {
		t.Errorf("aborted transactions wrote %q", ks)
	}
	// The fail mode applies to contention like to any backend error.
	closed, err := limiter.New(st, strategy.NewOptimistic(strategy.WithMaxAttempts(2), strategy.WithBackoff(0, 0)),
		limiter.WithFailMode(limiter.FailClosed))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := closed.Allow(ctx, "u", l); err != nil || r.Allowed || !r.Degraded || !errors.Is(r.Cause, limiter.ErrContention) {
		t.Errorf("FailClosed under contention = %+v, %v; want denied, Degraded, Cause ErrContention", r, err)
	}

	_, st = newScripted(t, store.ErrUnknownOutcome)
	lim = newLim(t, st, strategy.NewOptimistic())
	if _, err := lim.Allow(ctx, "u", l); !errors.Is(err, store.ErrUnknownOutcome) || errors.Is(err, limiter.ErrContention) {
		t.Errorf("lost EXEC reply = %v; want ErrUnknownOutcome", err)
	}
	if n := st.watches.Load(); n != 1 {
		t.Errorf("a lost EXEC reply was retried: %d transactions", n)
	}

	_, st = newScripted(t, store.ErrTxAborted)
	// A backoff of up to an hour: the deadline falls in the first wait.
	lim = newLim(t, st, strategy.NewOptimistic(strategy.WithMaxAttempts(1000), strategy.WithBackoff(time.Hour, time.Hour)))
	const deadline = 500 * time.Millisecond
	cctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	start := time.Now()
	_, err = lim.Allow(cctx, "u", l)
	if !errors.Is(err, limiter.ErrContention) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline during the backoff = %v; want ErrContention and DeadlineExceeded", err)
	}
	if took := time.Since(start); took > deadline+time.Second {
		t.Errorf("the retries outlived the context by %s", took-deadline)
	}
	if n := st.watches.Load(); n != 1 {
		t.Errorf("%d transactions before the deadline, want 1", n)
	}
}

// TestOptimisticRoundTrips: a peek, a cost 0 and a cost above the limit
// read without a transaction; an admission reads on the pinned connection
// and EXECs once; a denial does not EXEC unless a key needs its TTL back.
func TestOptimisticRoundTrips(t *testing.T) {
	m, st := newScripted(t, nil)
	lim := newLim(t, st, strategy.NewOptimistic())
	ctx := context.Background()
	l := limiter.PerMinute(2)
	type counts struct{ watches, reads, execs int64 }
	step := func(name string, f func() (limiter.Result, error), allowed bool, want counts) {
		t.Helper()
		before := counts{st.watches.Load(), st.reads.Load(), st.execs.Load()}
		r, err := f()
		if err != nil || r.Allowed != allowed {
			t.Fatalf("%s = %+v, %v; want allowed=%v", name, r, err, allowed)
		}
		got := counts{st.watches.Load() - before.watches, st.reads.Load() - before.reads, st.execs.Load() - before.execs}
		if got != want {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
	allow := func() (limiter.Result, error) { return lim.Allow(ctx, "u", l) }
	step("peek", func() (limiter.Result, error) { return lim.Peek(ctx, "u", l) }, true, counts{})
	step("first", allow, true, counts{1, 1, 1})
	if ttl := m.TTL("t:{u}:60000ms"); ttl != time.Minute {
		t.Errorf("new key TTL %s, want 1m (SET PX in the EXEC)", ttl)
	}
	m.Advance(10 * time.Second)
	step("second", allow, true, counts{1, 1, 1})
	if ttl := m.TTL("t:{u}:60000ms"); ttl != 50*time.Second {
		t.Errorf("TTL %s after INCRBY, want 50s: the window moved", ttl)
	}
	step("denied", allow, false, counts{1, 1, 0})
	step("cost 0", func() (limiter.Result, error) { return lim.AllowN(ctx, "u", 0, l) }, true, counts{})
	step("cost 3", func() (limiter.Result, error) { return lim.AllowN(ctx, "u", 3, l) }, false, counts{})
	persist(t, st, "t:{u}:60000ms")
	step("denied, key without TTL", allow, false, counts{1, 1, 1})
	if ttl := m.TTL("t:{u}:60000ms"); ttl != time.Minute {
		t.Errorf("TTL %s after a repairing denial, want 1m", ttl)
	}
	persist(t, st, "t:{u}:60000ms")
	step("cost 3, key without TTL", func() (limiter.Result, error) { return lim.AllowN(ctx, "u", 3, l) }, false, counts{1, 1, 1})
	if ttl := m.TTL("t:{u}:60000ms"); ttl != time.Minute {
		t.Errorf("TTL %s after a repairing over-limit call, want 1m", ttl)
	}
	if v, _ := m.Get("t:{u}:60000ms"); v != "2" {
		t.Errorf("counter %q after 2 admitted, want 2", v)
	}
}

func persist(t *testing.T, st store.Store, key string) {
	t.Helper()
	rs, err := st.Do(context.Background(), store.Cmd{Name: "PERSIST", Args: []any{key}})
	if err != nil || rs[0].Val != int64(1) {
		t.Fatalf("PERSIST %s: %v %v", key, rs, err)
	}
}

// TestOptimisticExpiryBetweenReadAndExec: a key that expires after the
// reads aborts the EXEC (it never comes back without TTL); the retry
// starts a new window.
func TestOptimisticExpiryBetweenReadAndExec(t *testing.T) {
	m, st := newScripted(t, nil)
	lim := newLim(t, &hooked{scripted: st, hook: func() {}}, strategy.NewOptimistic())
	ctx := context.Background()
	l := limiter.Per(5, 100*time.Millisecond)
	if r, err := lim.AllowN(ctx, "u", 3, l); err != nil || !r.Allowed {
		t.Fatalf("%+v, %v", r, err)
	}
	h := &hooked{scripted: st, hook: func() { m.Advance(150 * time.Millisecond) }, once: true}
	lim = newLim(t, h, strategy.NewOptimistic())
	before := st.watches.Load()
	r, err := lim.AllowN(ctx, "u", 2, l) // 3 + 2 fits: a write, aborted by the expiry
	if err != nil || !r.Allowed || r.Remaining != 3 {
		t.Fatalf("call across the expiry = %+v, %v; want admitted in a new window, 3 remaining", r, err)
	}
	if n := st.watches.Load() - before; n != 2 {
		t.Errorf("%d transactions, want 2 (the first aborted by the expiry)", n)
	}
	if ttl := m.TTL("t:{u}:100ms"); ttl != 100*time.Millisecond {
		t.Errorf("TTL %s, want 100ms (a new window)", ttl)
	}
}

// hooked runs hook after the first read of a transaction.
type hooked struct {
	*scripted
	hook func()
	once bool
	done atomic.Bool
}

func (h *hooked) Watch(ctx context.Context, keys []string, fn func(store.Tx) error) error {
	return h.scripted.Watch(ctx, keys, func(tx store.Tx) error { return fn(hookedTx{tx, h}) })
}

type hookedTx struct {
	store.Tx
	h *hooked
}

func (t hookedTx) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	rs, err := t.Tx.Do(ctx, cmds...)
	if !t.h.once || !t.h.done.Swap(true) {
		t.h.hook()
	}
	return rs, err
}

// hotKey runs g goroutines × m calls of lim on one key and counts the
// outcomes.
func hotKey(lim *limiter.Limiter, g, m int, l limiter.Limit) (admitted, denied, contention int64, other []error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	start := make(chan struct{})
	for range g {
		wg.Go(func() {
			<-start
			for range m {
				r, err := lim.Allow(context.Background(), "hot", l)
				mu.Lock()
				switch {
				case errors.Is(err, limiter.ErrContention):
					contention++
				case err != nil:
					other = append(other, err)
				case r.Allowed:
					admitted++
				default:
					denied++
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	return
}

// TestOptimisticHotKey: 200 goroutines × 50 calls on one key. With a large
// retry bound exactly the limit is admitted and nothing fails; with a
// small one admitted + denied + contention errors == calls and admitted <=
// limit. Both on a real redis-server (when installed); the small bound on
// miniredis too (the large one runs there as conformance property 1).
func TestOptimisticHotKey(t *testing.T) {
	const g, m, rate = 200, 50, 1000
	l := limiter.PerHour(rate)
	backends := map[string]func(t *testing.T) store.Store{
		"miniredis": func(t *testing.T) store.Store { _, st := newMini(t); return st },
		"redis-server": func(t *testing.T) store.Store {
			srv := redistest.StartServer(t)
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64})
			t.Cleanup(func() { _ = rdb.Close() })
			return goredis.New(rdb)
		},
	}
	for _, name := range []string{"miniredis", "redis-server"} {
		t.Run(name, func(t *testing.T) {
			st := backends[name](t)
			bounds := []int{1 << 12, 2}
			if name == "miniredis" {
				bounds = bounds[1:]
			}
			for _, bound := range bounds {
				lim := newLim(t, st, strategy.NewOptimistic(strategy.WithMaxAttempts(bound)))
				if err := lim.Reset(context.Background(), "hot", l); err != nil {
					t.Fatal(err)
				}
				a, d, c, other := hotKey(lim, g, m, l)
				t.Logf("bound %d: %d admitted, %d denied, %d contention errors", bound, a, d, c)
				if len(other) > 0 {
					t.Errorf("bound %d: %d other errors, first %v", bound, len(other), other[0])
				}
				if a+d+c != g*m {
					t.Errorf("bound %d: %d + %d + %d != %d calls", bound, a, d, c, g*m)
				}
				if a > rate || (bound > 2 && (a != rate || c != 0)) {
					t.Errorf("bound %d: admitted %d, %d contention errors, limit %d", bound, a, c, rate)
				}
				r, err := lim.Peek(context.Background(), "hot", l)
				if err != nil || r.Remaining != rate-a {
					t.Errorf("bound %d: counter says %d remaining (%v), admitted %d", bound, r.Remaining, err, a)
				}
			}
		})
	}
}
