package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// An Acquire whose context ended before it was called sends nothing: in
// no fail mode does it leave a key (it left an abandoned lease's
// tombstone that lived for the lease's TTL, one per call).
func TestAcquireWithAnEndedContextWritesNothing(t *testing.T) {
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := limiter.InFlight{Max: 2, TTL: time.Hour}
	for _, fm := range []limiter.FailMode{limiter.FailError, limiter.FailOpen, limiter.FailClosed} {
		c, err := limiter.NewConcurrency(goredis.New(rdb), strategy.NewConcurrency(), limiter.WithFailMode(fm))
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.Acquire(ctx, "u", f)
		switch fm {
		case limiter.FailError:
			if !errors.Is(err, context.Canceled) || l.Held {
				t.Errorf("%v: Acquire = %+v, %v; want an error wrapping context.Canceled", fm, l, err)
			}
		default:
			if err != nil || !l.Degraded || !errors.Is(l.Cause, context.Canceled) || l.Held != (fm == limiter.FailOpen) {
				t.Errorf("%v: Acquire = %+v, %v; want a degraded lease caused by context.Canceled", fm, l, err)
			}
		}
	}
	// nothing then, nor later: no release or abandon of a call that was
	// never sent runs behind it
	for _, after := range []time.Duration{0, 300 * time.Millisecond} {
		time.Sleep(after)
		if keys, err := rdb.Keys(context.Background(), "*").Result(); err != nil || len(keys) != 0 {
			t.Errorf("keys %s after Acquires on a cancelled context: %q, %v; want none", after, keys, err)
		}
	}
}

// With Redis silent, an Acquire returns at its context's deadline; the
// release of the slot it may have taken goes on without it (it returned
// after the release's own bound, a second, as the deadline's 150 ms).
func TestAcquireReturnsAtItsDeadline(t *testing.T) {
	srv := redistest.StartServer(t)
	p := redistest.NewProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := limiter.NewConcurrency(goredis.New(rdb), strategy.NewConcurrency())
	if err != nil {
		t.Fatal(err)
	}
	f := limiter.InFlight{Max: 2, TTL: time.Minute}
	if l, err := c.Acquire(context.Background(), "warm", f); err != nil || !l.Held { // loads the script
		t.Fatalf("Acquire = %+v, %v", l, err)
	}
	p.Blackhole(true)
	t.Cleanup(func() { p.Blackhole(false) })
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	l, err := c.Acquire(ctx, "u", f)
	// (a loaded machine may add some; the release's bound adds a second)
	if took := time.Since(start); took > 700*time.Millisecond || err == nil || l.Held {
		t.Errorf("Acquire with a 150 ms deadline on a silent Redis = %+v, %v after %v; want an error within the deadline", l, err, took.Round(time.Millisecond))
	}
}

// slowFirstReply runs the first script call, then holds its reply until the
// call's context ends (a reply later than the Limiter's timeout); the
// release that follows (the lease script's op "x", Abandon) reaches Redis
// 50 ms late. Calls are told apart by the lease script's op argument.
type slowFirstReply struct {
	store.Store
	mu      sync.Mutex
	n       int
	on      bool
	acq     string
	delayed bool
}

func (s *slowFirstReply) step(ctx context.Context, id string, run func() (any, error)) (any, error) {
	s.mu.Lock()
	on := s.on
	first := on && s.n == 0
	if first {
		s.n++
		s.acq = id
	}
	// the release (another script than the Acquire's), once armed
	release := s.acq != "" && id != s.acq && !s.delayed
	if release {
		s.delayed = true
	}
	s.mu.Unlock()
	if first {
		_, _ = run()
		<-ctx.Done()
		return nil, fmt.Errorf("%w: %w", store.ErrUnknownOutcome, ctx.Err())
	}
	if release {
		time.Sleep(50 * time.Millisecond)
	}
	return run()
}

func (s *slowFirstReply) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	return s.step(ctx, fmt.Sprint(args[0]), func() (any, error) { return s.Store.EvalSha(ctx, sha, keys, args) })
}

func (s *slowFirstReply) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	return s.step(ctx, fmt.Sprint(args[0]), func() (any, error) { return s.Store.Eval(ctx, src, keys, args) })
}

// A reply later than the Limiter's own timeout (WithTimeout) is an unknown
// outcome while the caller's context goes on: Acquire releases the slot
// before it returns, so that a retry finds it free (it waited on the
// timeout's context, already ended, and returned before the release).
func TestAcquireAfterTheLimitersTimeoutReleasesFirst(t *testing.T) {
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	st := &slowFirstReply{Store: goredis.New(rdb)}
	c, err := limiter.NewConcurrency(st, strategy.NewConcurrency(), limiter.WithTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	f := limiter.InFlight{Max: 1, TTL: time.Minute}
	if l, err := c.Acquire(context.Background(), "warm", f); err != nil || !l.Held {
		t.Fatalf("warm Acquire = %+v, %v", l, err)
	}
	st.mu.Lock()
	st.on = true
	st.mu.Unlock()
	l, err := c.Acquire(context.Background(), "u", f)
	if err == nil || l.Held {
		t.Fatalf("Acquire with a late reply = %+v, %v; want an error", l, err)
	}
	st.mu.Lock()
	st.on = false
	st.mu.Unlock()
	l, err = c.Acquire(context.Background(), "u", f)
	if err != nil || !l.Held {
		t.Errorf("retry right after the timed-out Acquire = %+v, %v; want Held (the slot released before Acquire returned)", l, err)
	}
}
