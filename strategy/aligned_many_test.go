package strategy_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/storetest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// TestAlignedWindowAllowMany: AllowMany decides AlignedWindow's asks in one
// batch, each as Allow would: on one server in one call of the
// many-request script, otherwise one EVALSHA per ask in one pipeline;
// every subject admitted exactly its limit, the denied ones told when its
// window ends, several limits all or nothing, a bad ask its own error.
func TestAlignedWindowAllowMany(t *testing.T) {
	for _, one := range []bool{true, false} {
		t.Run(fmt.Sprintf("one server %v", one), func(t *testing.T) {
			m, st := newMini(t)
			rc := &storetest.Batches{Store: st, One: one}
			lim := newLim(t, rc, strategy.NewAlignedWindow(strategy.WithAlignedClock(m.Now)))
			ctx := context.Background()
			hour, minute := limiter.PerHour(5), limiter.PerMinute(2)
			// 40 asks of 4 subjects at 5 per hour; subject k3 also at 2
			// per minute; one ask with an empty key
			asks := make([]limiter.Ask, 41)
			for i := range 40 {
				asks[i] = limiter.Ask{Key: fmt.Sprintf("k%d", i%4), Limits: []limiter.Limit{hour}}
				if i%4 == 3 {
					asks[i].Limits = append(asks[i].Limits, minute)
				}
			}
			asks[40] = limiter.Ask{Key: "", Limits: []limiter.Limit{hour}}
			warmUp(t, lim, rc)
			answers := lim.AllowMany(ctx, asks)
			// On one server, one call of the many-request script (which
			// keeps a subject's asks in their order); else one pipeline
			// per ask of a subject, in their order (a Cluster node may
			// send one back, and a later ask of the subject in the same
			// pipeline would run first): 10, each of 4 calls.
			if b, c := rc.BatchCount(), rc.CmdCount(); (one && (b != 1 || c != 1)) || (!one && (b != 10 || c != 40)) {
				t.Errorf("%d batches of %d commands in all; want %d of %d", b, c, map[bool]int{true: 1, false: 10}[one], map[bool]int{true: 1, false: 40}[one])
			}
			if !errors.Is(answers[40].Err, limiter.ErrInvalidKey) {
				t.Errorf("the empty key: %+v; want ErrInvalidKey", answers[40])
			}
			admitted := map[string]int{}
			for i, a := range answers[:40] {
				if a.Err != nil {
					t.Fatalf("ask %d: %v", i, a.Err)
				}
				r := a.Result
				if r.Allowed {
					admitted[asks[i].Key]++
					continue
				}
				if r.Remaining != 0 || r.RetryAfter <= 0 || r.RetryAfter > time.Hour || r.Limit != asks[i].Limits[r.Index] {
					t.Errorf("ask %d (%s) denied: %+v; want 0 remaining, retry within its window, the binding limit", i, asks[i].Key, r)
				}
			}
			want := map[string]int{"k0": 5, "k1": 5, "k2": 5, "k3": 2}
			for k, n := range want {
				if admitted[k] != n {
					t.Errorf("%s: %d admitted; want %d (admitted %v)", k, admitted[k], n, admitted)
				}
			}
			// Each count is in Redis: what Peek reads.
			for k, n := range want {
				ls := []limiter.Limit{hour}
				if k == "k3" {
					ls = append(ls, minute)
				}
				r, err := lim.Peek(ctx, k, ls...)
				if err != nil || r.Allowed {
					t.Errorf("Peek %s = %+v, %v; want its limit used up", k, r, err)
				}
				if k == "k3" {
					if r, err := lim.Peek(ctx, k, hour); err != nil || r.Remaining != 5-int64(n) {
						t.Errorf("Peek %s per hour = %+v, %v; want %d remaining (the minute's denials counted nowhere)", k, r, err, 5-n)
					}
				}
			}
		})
	}
}

// warmUp loads AlignedWindow's scripts in the server's cache (a batch that
// meets NOSCRIPT is sent again as EVAL) and reads its clock, then zeroes
// rc's counts.
func warmUp(t *testing.T, lim *limiter.Limiter, rc *storetest.Batches) {
	t.Helper()
	ctx := context.Background()
	for _, n := range []int{1, 2} { // the script alone, and its many-request companion
		asks := make([]limiter.Ask, n)
		for i := range asks {
			asks[i] = limiter.Ask{Key: fmt.Sprintf("warm%d", i), Limits: []limiter.Limit{limiter.PerHour(1)}}
		}
		for _, a := range lim.AllowMany(ctx, asks) {
			if a.Err != nil {
				t.Fatal(a.Err)
			}
		}
	}
	rc.Zero()
}

// TestAlignedWindowAllowManySkewed: after the app clock jumps two hours
// back, the batch's calls name windows the server's clock is not in; they
// are counted nowhere and go again, named from the server's time, in a
// second batch: each ask counted once, in the server's window.
func TestAlignedWindowAllowManySkewed(t *testing.T) {
	m, st := newMini(t)
	rc := &storetest.Batches{Store: st, One: true}
	var skew atomic.Int64
	now := func() time.Time { return m.Now().Add(time.Duration(skew.Load())) }
	lim := newLim(t, rc, strategy.NewAlignedWindow(strategy.WithAlignedClock(now)))
	ctx := context.Background()
	l := limiter.PerMinute(3)
	warmUp(t, lim, rc) // the first TIME sample is right
	skew.Store(int64(-2 * time.Hour))
	asks := make([]limiter.Ask, 8)
	for i := range asks {
		asks[i] = limiter.Ask{Key: fmt.Sprintf("s%d", i), Limits: []limiter.Limit{l}}
	}
	before := rc.BatchCount()
	for i, a := range lim.AllowMany(ctx, asks) {
		if a.Err != nil || !a.Result.Allowed || a.Result.Remaining != 2 || a.Result.ResetAfter > time.Minute {
			t.Fatalf("ask %d: %+v; want admitted with 2 remaining, reset within a minute", i, a)
		}
	}
	if b := rc.BatchCount() - before; b != 2 {
		t.Errorf("%d batches; want 2 (the windows named again once)", b)
	}
	var keys []string
	for _, k := range m.Keys() {
		if strings.HasPrefix(k, "t:{s") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var want []string
	for i := range asks {
		want = append(want, alignedKey(t, fmt.Sprintf("s%d", i), l, m.Now()))
	}
	sort.Strings(want)
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("keys %q; want %q (the server's window, each ask counted once)", keys, want)
	}
	// The offset is learned: the next batch names the right windows at once.
	before = rc.BatchCount()
	for i, a := range lim.AllowMany(ctx, asks) {
		if a.Err != nil || !a.Result.Allowed || a.Result.Remaining != 1 {
			t.Fatalf("second batch, ask %d: %+v; want admitted with 1 remaining", i, a)
		}
	}
	if b := rc.BatchCount() - before; b != 1 {
		t.Errorf("second batch: %d batches; want 1", b)
	}
}

// TestAlignedWindowAllowManyStale: a server whose clock is in a later
// window at every batch: each ask is denied with ErrStaleWindow as its
// Cause after 4 batches, and nothing is counted.
func TestAlignedWindowAllowManyStale(t *testing.T) {
	m, st := newMini(t)
	// the app's clock the system's, the server's a minute further on at
	// every batch
	rc := &storetest.Batches{Store: st, One: true}
	lim := newLim(t, rc, strategy.NewAlignedWindow())
	warmUp(t, lim, rc)
	rc.Before = func() { m.Advance(time.Minute) }
	asks := []limiter.Ask{
		{Key: "a", Limits: []limiter.Limit{limiter.PerMinute(5)}},
		{Key: "b", Cost: 2, Limits: []limiter.Limit{limiter.PerMinute(5)}},
	}
	for i, a := range lim.AllowMany(context.Background(), asks) {
		r := a.Result
		if a.Err != nil || r.Allowed || !errors.Is(r.Cause, strategy.ErrStaleWindow) || r.RetryAfter <= 0 || r.RetryAfter > time.Minute {
			t.Errorf("ask %d: %+v; want denied until the window's end with ErrStaleWindow", i, a)
		}
	}
	if b := rc.BatchCount(); b != 4 {
		t.Errorf("%d batches; want 4", b)
	}
	for _, k := range m.Keys() {
		if strings.HasPrefix(k, "t:{a}") || strings.HasPrefix(k, "t:{b}") {
			t.Errorf("key %q after stale decisions; want none", k)
		}
	}
}

// decoratedAligned embeds an AlignedWindow and decides through it,
// counting its calls: AllowMany must call its Decide, not batch through
// the embedded strategy.
type decoratedAligned struct {
	*strategy.AlignedWindow
	calls atomic.Int64
}

func (d *decoratedAligned) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	d.calls.Add(1)
	return d.AlignedWindow.Decide(ctx, st, req)
}

// TestAlignedWindowAllowManyDecorated: a strategy that embeds AlignedWindow
// has its own Decide called for each ask.
func TestAlignedWindowAllowManyDecorated(t *testing.T) {
	m, st := newMini(t)
	d := &decoratedAligned{AlignedWindow: strategy.NewAlignedWindow(strategy.WithAlignedClock(m.Now))}
	lim := newLim(t, &storetest.Batches{Store: st, One: true}, d)
	asks := make([]limiter.Ask, 6)
	for i := range asks {
		asks[i] = limiter.Ask{Key: "d", Limits: []limiter.Limit{limiter.PerHour(4)}}
	}
	admitted := 0
	for i, a := range lim.AllowMany(context.Background(), asks) {
		if a.Err != nil {
			t.Fatalf("ask %d: %v", i, a.Err)
		}
		if a.Result.Allowed {
			admitted++
		}
	}
	if n := d.calls.Load(); n != int64(len(asks)) || admitted != 4 {
		t.Errorf("the decorator's Decide called %d times, %d admitted; want %d calls, 4 admitted", n, admitted, len(asks))
	}
}
