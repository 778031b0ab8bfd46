package strategy_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// beforeTakeBack runs hook once, just before the first transaction that
// carries a DECRBY (Bucketed's take-back of a denied request) is sent.
type beforeTakeBack struct {
	store.Store
	done atomic.Bool
	hook func()
}

func (r *beforeTakeBack) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	for _, c := range cmds {
		if c.Name == "DECRBY" && r.done.CompareAndSwap(false, true) {
			r.hook()
			break
		}
	}
	return r.Store.Do(ctx, cmds...)
}

// onBackends runs f on miniredis and on a redis-server.
func onBackends(t *testing.T, f func(t *testing.T, st store.Store)) {
	t.Run("miniredis", func(t *testing.T) {
		_, st := newMini(t)
		f(t, st)
	})
	t.Run("redis-server", func(t *testing.T) { f(t, goredis.New(realServer(t))) })
}

// TestBucketedResetBeforeTakeBack: a Reset that lands between a denied
// request's INCRBY and its take-back must not leave the window's counter
// at −cost (the DECRBY re-creating the key), which would admit Rate+cost.
func TestBucketedResetBeforeTakeBack(t *testing.T) {
	onBackends(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		l := limiter.PerHour(10)
		hooked := &beforeTakeBack{Store: st}
		lim := newLim(t, hooked, strategy.NewBucketed())
		hooked.hook = func() {
			if err := lim.Reset(ctx, "u", l); err != nil {
				t.Error(err)
			}
		}
		if r, err := lim.AllowN(ctx, "u", 5, l); err != nil || !r.Allowed {
			t.Fatalf("5 of 10: %+v, %v", r, err)
		}
		if r, err := lim.AllowN(ctx, "u", 10, l); err != nil || r.Allowed || r.Cause != nil {
			t.Fatalf("10 on top of 5: %+v, %v; want denied, taken back", r, err)
		}
		if !hooked.done.Load() {
			t.Fatal("no take-back was sent")
		}
		admitted := int64(0)
		for range 30 {
			r, err := lim.Allow(ctx, "u", l)
			if err != nil {
				t.Fatal(err)
			}
			if r.Allowed {
				admitted++
			}
		}
		if admitted != l.Rate {
			t.Errorf("after the Reset, one window of %s admitted %d of 30 requests; want %d", l, admitted, l.Rate)
		}
	})
}

// TestBucketedTransientDenialRetry: a denial that rested on another
// call's cost, taken back by the time this call takes its own back, has
// a RetryAfter of 1 ms, not the rest of the window (which Wait would
// sleep, or refuse as longer than its deadline).
func TestBucketedTransientDenialRetry(t *testing.T) {
	onBackends(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		l := limiter.PerHour(10)
		plain := newLim(t, st, strategy.NewBucketed())
		if r, err := plain.AllowN(ctx, "s", 8, l); err != nil || !r.Allowed {
			t.Fatalf("8 of 10: %+v, %v", r, err)
		}
		// C counts its 1 while B's 5 is counted, and takes it back after
		// B has taken its 5 back.
		reached, proceed := make(chan struct{}), make(chan struct{})
		hookC := &beforeTakeBack{Store: st, hook: func() { close(reached); <-proceed }}
		limC := newLim(t, hookC, strategy.NewBucketed())
		type outcome struct {
			r   limiter.Result
			err error
		}
		done := make(chan outcome, 1)
		hookB := &beforeTakeBack{Store: st}
		hookB.hook = func() {
			go func() {
				r, err := limC.Allow(ctx, "s", l)
				done <- outcome{r, err}
			}()
			select {
			case <-reached:
			case <-time.After(10 * time.Second):
				t.Error("C did not reach its take-back in 10 s")
			}
		}
		limB := newLim(t, hookB, strategy.NewBucketed())
		if r, err := limB.AllowN(ctx, "s", 5, l); err != nil || r.Allowed || r.RetryAfter != r.ResetAfter || r.RetryAfter < time.Second {
			t.Fatalf("B, 5 on top of 8: %+v, %v; want denied until the window ends", r, err)
		}
		close(proceed)
		c := <-done
		if c.err != nil || c.r.Allowed || c.r.RetryAfter != time.Millisecond || c.r.Remaining != 2 {
			t.Errorf("C, 1 while B's 5 was counted: %+v, %v; want denied with RetryAfter 1ms, remaining 2 once both are taken back", c.r, c.err)
		}
		if r, err := plain.Allow(ctx, "s", l); err != nil || !r.Allowed || r.Remaining != 1 {
			t.Errorf("then 1 more: %+v, %v; want admitted, remaining 1", r, err)
		}
	})
}

// TestBucketedMoveAfterEviction: a decision stamped with a window ahead of
// the server's (the server's clock went back) is taken back from that
// window in the next transaction; when that window's key was evicted in
// between, the take-back must not leave it at −cost, where the window,
// once it comes, would start with cost more than its Rate.
func TestBucketedMoveAfterEviction(t *testing.T) {
	m, st := newMini(t)
	ctx := context.Background()
	l := limiter.PerSecond(5)
	hooked := &beforeTakeBack{Store: st}
	lim := newLim(t, hooked, strategy.NewBucketed())
	if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed { // syncs the clock
		t.Fatalf("first call: %+v, %v", r, err)
	}
	ahead := bucketKey(t, "u", l, m.Now())
	m.SetTime(m.Now().Add(-3 * time.Second)) // the app's estimate is now 3 windows ahead
	hooked.hook = func() { m.Del(ahead) }    // evicted between the two transactions
	if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed || r.Cause != nil {
		t.Fatalf("call stamped 3 windows ahead: %+v, %v; want admitted in the server's window", r, err)
	}
	if !hooked.done.Load() {
		t.Fatal("the decision was not moved")
	}
	if v, err := m.Get(ahead); err == nil && v != "0" {
		t.Errorf("the window ahead's counter holds %s after the move; want 0 or no key", v)
	}
	if ttl := m.TTL(ahead); m.Exists(ahead) && ttl <= 0 {
		t.Errorf("the window ahead's counter has TTL %s", ttl)
	}
}
