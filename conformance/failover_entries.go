package conformance

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// entryProbe is one entry point FailingOver proves through a store of its
// own: its calls before the failover, and after it, the first of which
// meets the demoted master (MOVED).
type entryProbe struct {
	name          string
	before, after func()
}

// failoverStrategies are the strategies whose entry points FailingOver
// probes; the first three are the ones with quota leases.
var failoverStrategies = []struct {
	name string
	make func() limiter.Strategy
}{
	{"FixedWindow", func() limiter.Strategy { return strategy.NewFixedWindow() }},
	{"Bucketed", func() limiter.Strategy { return strategy.NewBucketed() }},
	{"Optimistic", func() limiter.Strategy { return strategy.NewOptimistic() }},
	{"GCRA", func() limiter.Strategy { return strategy.NewGCRA() }},
	{"TokenBucket", func() limiter.Strategy { return strategy.NewTokenBucket() }},
	{"SlidingWindow", func() limiter.Strategy { return strategy.NewSlidingWindow() }},
	{"SlidingLog", func() limiter.Strategy { return strategy.NewSlidingLog() }},
	{"AlignedWindow", func() limiter.Strategy { return strategy.NewAlignedWindow() }},
}

// failoverEntries names FailingOver's probes: each strategy's entry points,
// the leased ones of the first three, and the concurrency leases'.
func failoverEntries() []string {
	var names []string
	for _, fs := range failoverStrategies {
		for _, e := range []string{"Allow", "Allow two limits", "Peek", "Reset (deny cache)", "Reset", "Wait", "AllowMany", "rules.Allow"} {
			names = append(names, fs.name+" "+e)
		}
	}
	for _, fs := range failoverStrategies[:3] {
		for _, e := range []string{"ReturnLeases", "leased Allow", "leased Reset"} {
			names = append(names, fs.name+" "+e)
		}
	}
	return append(names, "Concurrency Release", "Concurrency Acquire", "Concurrency Extend")
}

// entryProbes returns FailingOver's probes at l (5 per day) under
// FailOpen, each through a store from dial, on subjects from subject (keys
// on the master that fails over). Each entry point's first call after the
// failover is its own: Allow with one limit and with two, Peek (the same
// Remaining as before), Reset (with and without a deny cache: the subject
// has its 5 back), Wait, AllowMany and a rules.Limiter's two named rules,
// for each strategy; ReturnLeases, a leased Allow taking a new lease and a
// Reset of a subject holding one, for each strategy with quota leases; a
// concurrency lease's Release, Acquire and Extend. Each is decided by Redis
// (no error, not Degraded) and the counts after it are exact.
func entryProbes(ctx context.Context, t testing.TB, l limiter.Limit, dial func() store.Store, subject func(prefix string) string) []entryProbe {
	t.Helper()
	newLim := func(s limiter.Strategy, prefix string, opts ...limiter.Option) *limiter.Limiter {
		lim, err := limiter.New(dial(), s, append([]limiter.Option{limiter.WithPrefix(prefix), limiter.WithFailMode(limiter.FailOpen)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return lim
	}
	allows := func(lim *limiter.Limiter, name, phase, subj string, n, want int, limits ...limiter.Limit) {
		t.Helper()
		if len(limits) == 0 {
			limits = []limiter.Limit{l}
		}
		decideCalls(ctx, t, lim, name, phase, subj, n, want, limits...)
	}
	var probes []entryProbe
	const after = "after the failover"
	for i, fs := range failoverStrategies {
		sn, mk := fs.name, fs.make
		pfx := fmt.Sprintf("p%d", i)
		// Allow first
		{
			lim, s, name := newLim(mk(), pfx+"a"), subject(pfx+"a"), sn+" Allow"
			probes = append(probes, entryProbe{name,
				func() { allows(lim, name, "before", s, 2, 2) },
				func() { allows(lim, name, after, s, 4, 3) }})
		}
		// multi-limit Allow first
		{
			lim, s, name := newLim(mk(), pfx+"m"), subject(pfx+"m"), sn+" Allow two limits"
			week := limiter.Limit{Rate: 100, Period: 7 * 24 * time.Hour}
			probes = append(probes, entryProbe{name,
				func() { allows(lim, name, "before", s, 2, 2, l, week) },
				func() { allows(lim, name, after, s, 4, 3, l, week) }})
		}
		// Peek first
		{
			lim, s, name := newLim(mk(), pfx+"p"), subject(pfx+"p"), sn+" Peek"
			var was limiter.Result
			probes = append(probes, entryProbe{name,
				func() {
					allows(lim, name, "before", s, 2, 2)
					var err error
					if was, err = lim.Peek(ctx, s, l); err != nil || was.Degraded {
						t.Errorf("%s: before: Peek = %+v, %v", name, was, err)
					}
				},
				func() {
					r, err := lim.Peek(ctx, s, l)
					if err != nil || r.Degraded || !r.Allowed || r.Remaining != was.Remaining {
						t.Errorf("%s: %s: Peek = %+v, %v; want decided by Redis, allowed, Remaining %d", name, after, r, err, was.Remaining)
					}
					allows(lim, name, after, s, 4, 3)
				}})
		}
		// Reset first, with a deny cache and without
		for _, r := range []struct {
			suffix, label string
			opts          []limiter.Option
		}{{"r", " (deny cache)", []limiter.Option{limiter.WithDenyCache(64)}}, {"R", "", nil}} {
			lim, s, name := newLim(mk(), pfx+r.suffix, r.opts...), subject(pfx+r.suffix), sn+" Reset"+r.label
			probes = append(probes, entryProbe{name,
				func() { allows(lim, name, "before", s, 6, 5) },
				func() {
					if err := lim.Reset(ctx, s, l); err != nil {
						t.Errorf("%s: %s: Reset = %v", name, after, err)
					}
					allows(lim, name, "after the failover and Reset", s, 6, 5)
				}})
		}
		// Wait first
		{
			lim, s, name := newLim(mk(), pfx+"w"), subject(pfx+"w"), sn+" Wait"
			probes = append(probes, entryProbe{name,
				func() { allows(lim, name, "before", s, 2, 2) },
				func() {
					wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
					defer wcancel()
					r, err := lim.Wait(wctx, s, l)
					if err != nil || r.Degraded || !r.Allowed {
						t.Errorf("%s: %s: Wait = %+v, %v; want admitted by Redis", name, after, r, err)
					}
					allows(lim, name, after, s, 3, 2)
				}})
		}
		// AllowMany first
		{
			lim, s, name := newLim(mk(), pfx+"b"), subject(pfx+"b"), sn+" AllowMany"
			many := func(phase string, n, want int) { decideMany(ctx, t, lim, name, phase, s, n, want, l) }
			probes = append(probes, entryProbe{name, func() { many("before", 2, 2) }, func() { many(after, 4, 3) }})
		}
		// rules: multi-rule decision first
		{
			lim, s, name := newLim(mk(), pfx+"u"), subject(pfx+"u"), sn+" rules.Allow"
			set := &rules.Set{Subjects: map[string][]limiter.Limit{s: {l.Named("d"), limiter.Limit{Rate: 100, Period: 7 * 24 * time.Hour}.Named("w")}}, Default: rules.DenyUnknown()}
			rl, err := rules.New(ctx, lim, rules.Static(set))
			if err != nil {
				t.Fatal(err)
			}
			dec := func(phase string, n, want int) {
				admitted := 0
				for i := range n {
					d, err := rl.Allow(ctx, s)
					if err != nil || d.Degraded {
						t.Errorf("%s: %s: call %d = %+v, %v; want decided by Redis", name, phase, i+1, d, err)
						return
					}
					if d.Allowed {
						admitted++
					}
				}
				if admitted != want {
					t.Errorf("%s: %s: %d of %d admitted; want %d", name, phase, admitted, n, want)
				}
			}
			probes = append(probes, entryProbe{name, func() { dec("before", 2, 2) }, func() { dec(after, 4, 3) }})
		}
	}

	// Quota leases (WindowQuota strategies), units 2 of 5
	for i, fs := range failoverStrategies[:3] { // the WindowQuota ones
		sn, mk := fs.name, fs.make
		pfx := fmt.Sprintf("q%d", i)
		{ // ReturnLeases first
			p := pfx + "t"
			lim, plain, s, name := newLim(mk(), p, limiter.WithQuotaLease(2)), newLim(mk(), p), subject(p), sn+" ReturnLeases"
			probes = append(probes, entryProbe{name,
				func() { allows(lim, name, "before", s, 1, 1) },
				func() {
					n, err := lim.ReturnLeases(ctx, 0)
					if err != nil || n != 1 {
						t.Errorf("%s: %s: ReturnLeases = %d, %v; want 1, nil", name, after, n, err)
					}
					allows(plain, name, "after the failover and ReturnLeases (no lease)", s, 5, 4)
				}})
		}
		{ // leased Allow first (a new lease from Redis)
			p := pfx + "l"
			lim, plain, s, name := newLim(mk(), p, limiter.WithQuotaLease(2)), newLim(mk(), p), subject(p), sn+" leased Allow"
			probes = append(probes, entryProbe{name,
				func() { allows(lim, name, "before", s, 2, 2) },
				func() {
					allows(lim, name, after, s, 1, 1)
					allows(plain, name, "after the failover (no lease)", s, 3, 1)
				}})
		}
		{ // Reset with a lease first
			p := pfx + "r"
			lim, s, name := newLim(mk(), p, limiter.WithQuotaLease(2)), subject(p), sn+" leased Reset"
			probes = append(probes, entryProbe{name,
				func() { allows(lim, name, "before", s, 5, 5) },
				func() {
					if err := lim.Reset(ctx, s, l); err != nil {
						t.Errorf("%s: %s: Reset = %v", name, after, err)
					}
					allows(lim, name, "after the failover and Reset", s, 6, 5)
				}})
		}
	}

	// Concurrency leases
	inflight := limiter.InFlight{Max: 3, TTL: time.Minute}
	newConc := func() *limiter.Concurrency {
		c, err := limiter.NewConcurrency(dial(), strategy.NewConcurrency(), limiter.WithPrefix("cc"), limiter.WithFailMode(limiter.FailOpen))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	acquire := func(c *limiter.Concurrency, name, phase, s string, held bool, inFlight int64) limiter.Lease {
		t.Helper()
		ls, err := c.Acquire(ctx, s, inflight)
		if err != nil || ls.Degraded || ls.Held != held || ls.InFlight != inFlight {
			t.Errorf("%s: %s: Acquire = %+v, %v; want decided by Redis, held %v, %d in flight", name, phase, ls, err, held, inFlight)
		}
		return ls
	}
	{
		c, s, name := newConc(), subject("cc"), "Concurrency Release"
		var held limiter.Lease
		probes = append(probes, entryProbe{name,
			func() { held = acquire(c, name, "before", s, true, 1); acquire(c, name, "before", s, true, 2) },
			func() {
				if err := held.Release(ctx); err != nil {
					t.Errorf("%s: %s: Release = %v", name, after, err)
				}
				acquire(c, name, "after the failover and Release", s, true, 2)
				acquire(c, name, "after the failover and Release", s, true, 3)
				acquire(c, name, "after the failover and Release", s, false, 3)
			}})
	}
	{
		c, s, name := newConc(), subject("cc"), "Concurrency Acquire"
		probes = append(probes, entryProbe{name,
			func() { acquire(c, name, "before", s, true, 1) },
			func() {
				acquire(c, name, after, s, true, 2)
				acquire(c, name, after, s, true, 3)
				acquire(c, name, after, s, false, 3)
			}})
	}
	{
		c, s, name := newConc(), subject("cc"), "Concurrency Extend"
		var held limiter.Lease
		probes = append(probes, entryProbe{name,
			func() { held = acquire(c, name, "before", s, true, 1) },
			func() {
				ok, err := held.Extend(ctx)
				if err != nil || !ok {
					t.Errorf("%s: %s: Extend = %v, %v; want true, nil", name, after, ok, err)
				}
				acquire(c, name, after, s, true, 2)
			}})
	}

	names := make([]string, len(probes))
	for i, p := range probes {
		names[i] = p.name
	}
	if want := failoverEntries(); !slices.Equal(names, want) {
		t.Fatalf("FailingOver's probes %q are not the entry points it names %q", names, want)
	}
	return probes
}
