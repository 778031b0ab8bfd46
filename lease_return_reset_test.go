package limiter_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/derive"
	"github.com/quotagate/limiter/limitertest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// returnHook runs before the first quota-return call of the kind chosen:
// the read of a window's end (read), or the return of units to it.
type returnHook struct {
	store.Store
	read bool
	mu   sync.Mutex
	hook func()
}

func (h *returnHook) fire(isRead, isReturn bool) {
	h.mu.Lock()
	f := h.hook
	if f != nil && (h.read && isRead || !h.read && isReturn) {
		h.hook = nil
	} else {
		f = nil
	}
	h.mu.Unlock()
	if f != nil {
		f()
	}
}

// script calls: FixedWindow's quota-return script takes "0" to read, "1"
// to return.
func (h *returnHook) script(args []any) {
	if len(args) > 0 {
		v, _ := args[0].(int64)
		h.fire(len(args) == 1 && v == 0, len(args) == 3 && v == 1)
	}
}

func (h *returnHook) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	// Optimistic reads with PEXPIRETIME, Bucketed with MULTI TIME GET
	// EXEC, and Bucketed returns with MULTI TIME DECRBY ... EXEC.
	if len(cmds) > 0 {
		read := cmds[0].Name == "PEXPIRETIME" || len(cmds) == 4 && cmds[0].Name == "MULTI" && cmds[2].Name == "GET"
		ret := cmds[0].Name == "MULTI" && len(cmds) > 2 && cmds[2].Name == "DECRBY"
		h.fire(read, ret)
	}
	return h.Store.Do(ctx, cmds...)
}

func (h *returnHook) Watch(ctx context.Context, keys []string, fn func(store.Tx) error) error {
	h.fire(false, true) // Optimistic returns units under WATCH
	return h.Store.(store.Watcher).Watch(ctx, keys, fn)
}

func (h *returnHook) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	h.script(args)
	return h.Store.EvalSha(ctx, sha, keys, args)
}

func (h *returnHook) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	h.script(args)
	return h.Store.Eval(ctx, src, keys, args)
}

// A Reset of a subject, in the process that is giving the subject's leased
// units back, deletes the window the units were counted in: they must not
// be taken off the window counted anew after it. Reset 90 ms into a
// window of 10/s, then 20 calls: with a lease of 5 given back (4 unused),
// the new window admitted 14.
func TestReturnLeasesNeverGivesToAWindowAfterAReset(t *testing.T) {
	for name, mk := range map[string]func() limiter.Strategy{
		"FixedWindow": func() limiter.Strategy { return strategy.NewFixedWindow() },
		"Optimistic":  func() limiter.Strategy { return strategy.NewOptimistic() },
		"Bucketed":    func() limiter.Strategy { return strategy.NewBucketed() },
	} {
		// read: the Reset runs just before the window's end is read;
		// return: just before the units go back (the Reset waits for
		// them, so they come off the old window, which it then deletes).
		for _, read := range []bool{true, false} {
			t.Run(name+"/"+map[bool]string{true: "reset-before-read", false: "reset-during-return"}[read], func(t *testing.T) {
				st, clock := limitertest.Store(t)
				s := mk()
				if cu, ok := s.(derive.ClockUser); ok {
					cu.UseClock(derive.Token{}, clock.Now)
				}
				h := &returnHook{Store: st, read: read}
				lim, err := limiter.New(h, s, limiter.WithClock(clock.Now), limiter.WithQuotaLease(5))
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				l := limiter.PerSecond(10)
				if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed {
					t.Fatalf("first call = %+v, %v", r, err)
				}
				admitted := 0
				after := func() { // the new window's traffic, through Redis (two limits take no lease)
					for range 20 {
						if r, err := lim.Allow(ctx, "u", l, limiter.PerMinute(1000)); err == nil && r.Allowed {
							admitted++
						}
					}
				}
				reset := make(chan error, 1)
				h.mu.Lock()
				h.hook = func() {
					clock.Advance(90 * time.Millisecond)
					if read {
						reset <- lim.Reset(ctx, "u", l)
						after()
						return
					}
					go func() { reset <- lim.Reset(ctx, "u", l) }()
					select {
					case err := <-reset:
						t.Errorf("Reset returned (%v) while a return of the subject's units was in flight", err)
						reset <- err
					case <-time.After(50 * time.Millisecond):
					}
				}
				h.mu.Unlock()
				n, err := lim.ReturnLeases(ctx, 0)
				if err := <-reset; err != nil {
					t.Fatalf("Reset: %v", err)
				}
				if !read {
					after()
				}
				for range 20 {
					if r, err := lim.Allow(ctx, "u", l); err == nil && r.Allowed {
						admitted++
					}
				}
				if admitted != 10 {
					t.Errorf("Reset %s: the window after it admitted %d, want 10 (ReturnLeases gave back %d, %v)",
						map[bool]string{true: "before the window's end was read", false: "while the units went back"}[read], admitted, n, err)
				}
			})
		}
	}
}

// A Reset of one limit of a subject deletes that limit's windows only: the
// units of a lease under another limit of the subject, whose window the
// Reset left alone, still go back (they were kept counted until the
// window's end).
func TestReturnLeasesAfterAResetOfAnotherLimit(t *testing.T) {
	st, clock := limitertest.Store(t)
	h := &returnHook{Store: st, read: true}
	lim, err := limiter.New(h, strategy.NewFixedWindow(), limiter.WithClock(clock.Now), limiter.WithQuotaLease(5))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	leased, other := limiter.PerSecond(10), limiter.PerMinute(100)
	if r, err := lim.Allow(ctx, "u", leased); err != nil || !r.Allowed {
		t.Fatalf("first call = %+v, %v", r, err)
	}
	h.mu.Lock()
	h.hook = func() {
		if err := lim.Reset(ctx, "u", other); err != nil {
			t.Errorf("Reset of the other limit: %v", err)
		}
	}
	h.mu.Unlock()
	if n, err := lim.ReturnLeases(ctx, 0); err != nil || n != 4 {
		t.Errorf("ReturnLeases with a Reset of another limit (%s) of the subject = %d, %v; want the lease's 4 unused units of %s back", other, n, err, leased)
	}
	r, err := lim.Peek(ctx, "u", leased, limiter.PerHour(1000)) // two limits: through Redis
	if err != nil || r.Remaining != 9 {
		t.Errorf("after it, %s has %d remaining (%v); want 9", leased, r.Remaining, err)
	}
}
