package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// The checks of a Leaser (a Spec with Leaser set): concurrency leases held
// in Redis.

// concurrency returns a Concurrency of the spec's leaser on the harness's
// store, under the check's prefix, and records f's TTL for the final sweep.
func (c *checker) concurrency(f limiter.InFlight) *limiter.Concurrency {
	c.t.Helper()
	c.maxWindow = max(c.maxWindow, f.TTL)
	conc, err := limiter.NewConcurrency(c.h.Store(), c.spec.Leaser, limiter.WithPrefix(c.prefix))
	if err != nil {
		c.t.Fatalf("limiter.NewConcurrency: %v", err)
	}
	return conc
}

// inFlight returns the members of subject's lease set (whatever its
// leaser counts), read from the server: for a sorted set the members
// scored above 0 (leases are scored by their expiry; strategy.Concurrency
// keeps an abandoned ID as a tombstone with a negative score), the value
// for a counter.
func (c *checker) inFlight(subject string, f limiter.InFlight) int64 {
	c.t.Helper()
	key, _ := limiter.InFlightKey(c.prefix, subject, f)
	r, err := c.do(store.Cmd{Name: "TYPE", Args: []any{key}})
	if err != nil || r.Err != nil {
		c.t.Fatalf("TYPE %s: %v %v", key, err, r.Err)
	}
	typ, _ := store.String(r.Val)
	cmd := store.Cmd{Name: "ZCOUNT", Args: []any{key, "(0", "+inf"}}
	switch typ {
	case "none":
		return 0
	case "string":
		cmd = store.Cmd{Name: "GET", Args: []any{key}}
	}
	r, err = c.do(cmd)
	if err == nil {
		err = r.Err
	}
	n, perr := store.Int64(r.Val)
	if err != nil || perr != nil {
		c.t.Fatalf("%s %s: %v %v", cmd.Name, key, err, perr)
	}
	return n
}

// Property 36: under contention exactly Max leases are held: 100 callers
// race for 4 slots, three times (on three subjects), so that a design
// whose count and add are apart loses at least one race on a busy machine.
func checkLeasesExact(c *checker) {
	for round := range 3 {
		c.leasesRace(fmt.Sprintf("p36-%d", round))
	}
}

func (c *checker) leasesRace(subject string) {
	const callers = 100
	f := limiter.InFlight{Max: 4, TTL: time.Minute}
	conc := c.concurrency(f)
	var (
		mu   sync.Mutex
		held []limiter.Lease
	)
	a, _, errs := hammer(callers, 1, func(int, int) (limiter.Result, error) {
		var l limiter.Lease
		_, err := c.underLoad(func(ctx context.Context) (limiter.Result, error) {
			var err error
			l, err = conc.Acquire(ctx, subject, f)
			return limiter.Result{Allowed: l.Held}, err
		})
		if err == nil && l.Held {
			mu.Lock()
			held = append(held, l)
			mu.Unlock()
		}
		return limiter.Result{Allowed: l.Held}, err
	})
	unknown := c.unknownOutcomes("property 36", callers, errs)
	if a > f.Max || a+unknown < f.Max {
		c.t.Errorf("property 36: %d callers raced for %d slots of %s: %d leases granted (and %d calls whose outcome is unknown), want exactly %d", callers, f.Max, subject, a, unknown, f.Max)
	}
	if n := c.inFlight(subject, f); n < a || n > a+unknown {
		c.t.Errorf("property 36: the server holds %d leases of %s, %d were granted (and %d calls' outcome is unknown)", n, subject, a, unknown)
	}
	for _, l := range held {
		if err := l.Release(c.ctx); err != nil {
			c.t.Errorf("property 36: Release: %v", err)
		}
	}
	if n := c.inFlight(subject, f); n != 0 && unknown == 0 {
		c.t.Errorf("property 36: %d leases of %s left after every holder released", n, subject)
	}
}

// Property 37: a holder that never releases (it crashed) frees its slot
// when its lease's TTL has passed, and the lease set never outlives its
// latest lease. On the virtual clock, where the leases are taken 500 ms
// apart, a refusal's RetryAfter is exactly the time until the oldest lease
// ends, and is honoured: a millisecond before, the Acquire is refused
// again, and at RetryAfter it is held beside the younger lease.
func checkCrashedHolder(c *checker) {
	f := limiter.InFlight{Max: 2, TTL: 1500 * time.Millisecond}
	const apart = 500 * time.Millisecond
	virtual := c.h.Caps().VirtualClock
	conc := c.concurrency(f)
	for i := range 2 {
		if l, err := conc.Acquire(c.ctx, "p37", f); err != nil || !l.Held {
			c.t.Fatalf("property 37: lease %d = %s, %v; want held", i, leaseString(l), err)
		}
		if virtual && i == 0 {
			c.h.Advance(apart)
		}
	}
	// The holders crash: nobody releases.
	l, err := conc.Acquire(c.ctx, "p37", f)
	if err != nil || l.Held || l.RetryAfter <= 0 || l.RetryAfter > f.TTL {
		c.t.Fatalf("property 37: a third lease of 2 = %s, %v; want refused, RetryAfter in (0, %s]", leaseString(l), err, f.TTL)
	}
	if virtual {
		if l.RetryAfter != f.TTL-apart {
			c.t.Errorf("property 37: a third lease of 2, %s after the first of %s was taken = %s; want RetryAfter %s (the first lease's end)", apart, f.TTL, leaseString(l), f.TTL-apart)
		}
		c.h.Advance(f.TTL - apart - time.Millisecond)
		if l, err := conc.Acquire(c.ctx, "p37", f); err != nil || l.Held || l.RetryAfter != time.Millisecond {
			c.t.Errorf("property 37: a millisecond before the first lease ends, an Acquire = %s, %v; want refused, RetryAfter 1ms", leaseString(l), err)
		}
		c.h.Advance(time.Millisecond)
		if l, err := conc.Acquire(c.ctx, "p37", f); err != nil || !l.Held || l.InFlight != 2 {
			c.t.Errorf("property 37: when the first lease has ended, an Acquire = %s, %v; want held, 2 in flight (the second crashed lease still holds its slot)", leaseString(l), err)
		}
	}
	for _, k := range c.keys() {
		if p := c.pttl(k); p == -1 || time.Duration(p)*time.Millisecond > f.TTL {
			c.t.Errorf("property 37: lease set %q has PTTL %dms, want in (0, %s] (it ends with its latest lease)", k, p, f.TTL)
		}
	}
	c.h.Advance(f.TTL + 10*time.Millisecond)
	if l, err := conc.Acquire(c.ctx, "p37", f); err != nil || !l.Held || l.InFlight != 1 {
		c.t.Errorf("property 37: a lease after the crashed holders' TTL = %s, %v; want held, alone in flight (their slots are free again)", leaseString(l), err)
	}
}

// Property 38: Release frees exactly its own slot: releasing twice, after
// expiry, or a lease never held changes nothing else and is no error.
func checkReleaseHarmless(c *checker) {
	f := limiter.InFlight{Max: 2, TTL: time.Minute}
	conc := c.concurrency(f)
	a, errA := conc.Acquire(c.ctx, "p38", f)
	b, errB := conc.Acquire(c.ctx, "p38", f)
	if errA != nil || errB != nil || !a.Held || !b.Held {
		c.t.Fatalf("property 38: two leases of 2 = (%s, %v), (%s, %v)", leaseString(a), errA, leaseString(b), errB)
	}
	for i := range 3 {
		if err := a.Release(c.ctx); err != nil {
			c.t.Fatalf("property 38: release %d of one lease: %v", i+1, err)
		}
	}
	// A Release of an ID that was never acquired.
	ghost := limiter.LeaseRequest{Key: mustInFlightKey(c, "p38", f), ID: "never-acquired", Limit: f}
	if err := c.spec.Leaser.Release(c.ctx, c.h.Store(), ghost); err != nil {
		c.t.Fatalf("property 38: release of an unknown lease: %v", err)
	}
	if n := c.inFlight("p38", f); n != 1 {
		c.t.Errorf("property 38: after one lease was released three times and an unknown one once, the server holds %d leases, want 1 (the other holder's)", n)
	}
	granted := 0
	for range 3 {
		l, err := conc.Acquire(c.ctx, "p38", f)
		if err != nil {
			c.t.Fatalf("property 38: %v", err)
		}
		if l.Held {
			granted++
		}
	}
	if granted != 1 {
		c.t.Errorf("property 38: with one of 2 slots held, 3 acquires were granted %d leases, want 1 (repeated releases freed slots they did not hold)", granted)
	}
}

// Property 39: a retried Acquire (the same lease ID again, as when a reply
// was lost) holds one slot, not two, and renews the lease.
func checkLeaseRetry(c *checker) {
	f := limiter.InFlight{Max: 2, TTL: time.Minute}
	c.concurrency(f)
	req := limiter.LeaseRequest{Key: mustInFlightKey(c, "p39", f), ID: "retried-lease", Limit: f}
	for i := range 3 {
		st, err := c.spec.Leaser.Acquire(c.ctx, c.h.Store(), req)
		if err != nil || !st.Held || st.InFlight != 1 {
			c.t.Fatalf("property 39: attempt %d of one lease = %+v, %v; want held, 1 in flight", i+1, st, err)
		}
	}
	if n := c.inFlight("p39", f); n != 1 {
		c.t.Fatalf("property 39: one lease tried 3 times holds %d slots, want 1", n)
	}
	if err := c.spec.Leaser.Release(c.ctx, c.h.Store(), req); err != nil {
		c.t.Fatal(err)
	}
	if n := c.inFlight("p39", f); n != 0 {
		c.t.Errorf("property 39: after its release the retried lease still holds %d slots", n)
	}
	other := req
	other.ID = "other-lease"
	st, err := c.spec.Leaser.Extend(c.ctx, c.h.Store(), other)
	if err != nil || st.Held {
		c.t.Errorf("property 39: Extend of a lease never held = %+v, %v; want not held (nothing written)", st, err)
	}
	if n := c.inFlight("p39", f); n != 0 {
		c.t.Errorf("property 39: Extend of a lease never held took a slot (%d held)", n)
	}
	if !c.h.Caps().VirtualClock {
		return
	}
	// A held lease renewed (Extend, or Acquire of its ID again) 8 s into
	// its 10 s is held until 18 s: at 13 s its slot is still taken.
	g := limiter.InFlight{Max: 1, TTL: 10 * time.Second}
	c.concurrency(g)
	for _, op := range []string{"Extend", "Acquire"} {
		mine := limiter.LeaseRequest{Key: mustInFlightKey(c, "p39-renew-"+op, g), ID: "renewed", Limit: g}
		if st, err := c.spec.Leaser.Acquire(c.ctx, c.h.Store(), mine); err != nil || !st.Held {
			c.t.Fatalf("property 39: Acquire = %+v, %v; want held", st, err)
		}
		c.h.Advance(8 * time.Second)
		renew := c.spec.Leaser.Extend
		if op == "Acquire" {
			renew = c.spec.Leaser.Acquire
		}
		if st, err := renew(c.ctx, c.h.Store(), mine); err != nil || !st.Held {
			c.t.Fatalf("property 39: %s of a held lease 8 s into its 10 s = %+v, %v; want held", op, st, err)
		}
		c.h.Advance(5 * time.Second)
		other := mine
		other.ID = "other"
		if st, err := c.spec.Leaser.Acquire(c.ctx, c.h.Store(), other); err != nil || st.Held {
			c.t.Errorf("property 39: 13 s after the Acquire of a lease renewed by %s at 8 s for 10 s, another Acquire of its one slot = %+v, %v; want refused (the lease is held until 18 s)", op, st, err)
		}
		if st, err := c.spec.Leaser.Extend(c.ctx, c.h.Store(), mine); err != nil || !st.Held {
			c.t.Errorf("property 39: 13 s after the Acquire, Extend of the lease renewed by %s at 8 s = %+v, %v; want held", op, st, err)
		}
		if err := c.spec.Leaser.Release(c.ctx, c.h.Store(), mine); err != nil {
			c.t.Fatal(err)
		}
	}
}

func mustInFlightKey(c *checker, subject string, f limiter.InFlight) string {
	c.t.Helper()
	k, err := limiter.InFlightKey(c.prefix, subject, f)
	if err != nil {
		c.t.Fatalf("InFlightKey: %v", err)
	}
	return k
}

// leaseString formats what a check says about a Lease.
func leaseString(l limiter.Lease) string {
	return fmt.Sprintf("{held %v, %d in flight, retry after %s, degraded %v}", l.Held, l.InFlight, l.RetryAfter, l.Degraded)
}

// Property 43: an Acquire whose outcome is unknown (its reply lost, or its
// deadline met while the call was still on its way) is ended so that it
// takes no slot even when it reaches Redis after the release: the Leaser
// must have Abandon (limiter.LeaseAbandoner), and an Acquire or Extend of
// an abandoned ID, run after the Abandon, holds nothing. Another lease is
// held as usual, and the tombstone leaves with the TTL.
func checkLateAcquireAbandoned(c *checker) {
	f := limiter.InFlight{Max: 1, TTL: 1500 * time.Millisecond}
	c.concurrency(f)
	ab, ok := c.spec.Leaser.(limiter.LeaseAbandoner)
	if !ok {
		c.t.Fatalf("property 43: the Leaser %T has no Abandon (limiter.LeaseAbandoner): an Acquire whose release reaches Redis before it (a timeout, a congested connection) takes a slot no caller holds until its TTL ends", c.spec.Leaser)
	}
	req := limiter.LeaseRequest{Key: mustInFlightKey(c, "p43", f), ID: "late-acquire", Limit: f}
	if err := ab.Abandon(c.ctx, c.h.Store(), req); err != nil {
		c.t.Fatalf("property 43: Abandon of a lease never acquired: %v", err)
	}
	// The Acquire arrives after its release.
	st, err := c.spec.Leaser.Acquire(c.ctx, c.h.Store(), req)
	if err != nil || st.Held || st.InFlight != 0 {
		c.t.Errorf("property 43: an Acquire that arrives after its Abandon = %+v, %v; want not held, none in flight (the only slot would be held by nobody)", st, err)
	}
	if st, err := c.spec.Leaser.Extend(c.ctx, c.h.Store(), req); err != nil || st.Held {
		c.t.Errorf("property 43: Extend of an abandoned lease = %+v, %v; want not held", st, err)
	}
	if n := c.inFlight("p43", f); n != 0 {
		c.t.Errorf("property 43: after an abandoned Acquire arrived late, the server holds %d leases, want 0", n)
	}
	conc := c.concurrency(f)
	l, err := conc.Acquire(c.ctx, "p43", f)
	if err != nil || !l.Held || l.InFlight != 1 {
		c.t.Errorf("property 43: another caller's lease = %s, %v; want held, 1 in flight", leaseString(l), err)
	}
	for _, k := range c.keys() {
		if p := c.pttl(k); p == -1 || time.Duration(p)*time.Millisecond > f.TTL {
			c.t.Errorf("property 43: key %q has PTTL %dms, want in (0, %s]", k, p, f.TTL)
		}
	}
	// Abandoning a lease that is held frees its slot.
	held := limiter.LeaseRequest{Key: req.Key, ID: l.ID(), Limit: f}
	if err := ab.Abandon(c.ctx, c.h.Store(), held); err != nil {
		c.t.Fatalf("property 43: Abandon of a held lease: %v", err)
	}
	if n := c.inFlight("p43", f); n != 0 {
		c.t.Errorf("property 43: after the held lease was abandoned, the server holds %d leases, want 0", n)
	}
	c.h.Advance(f.TTL + 10*time.Millisecond)
	if l, err := conc.Acquire(c.ctx, "p43", f); err != nil || !l.Held || l.InFlight != 1 {
		c.t.Errorf("property 43: a lease after the tombstones' TTL = %s, %v; want held, alone in flight", leaseString(l), err)
	}
}

// Property 49: leases of one subject taken under different limits
// (callers that disagree on the TTL or the Max, as while a rollout changes
// them) share one lease set. A caller whose Max is below what is held is
// refused until enough leases end for it: its RetryAfter is the time until
// the last of them ends, not the first. Each lease ends at its own TTL: a
// lease with a shorter TTL leaves the set's expiry at a longer lease's
// end, so when it ends the longer lease still holds its slot; and an ID
// abandoned for longer than a lease beside it stays refused after that
// lease has ended.
func checkMixedLimitLeases(c *checker) {
	long := limiter.InFlight{Max: 2, TTL: time.Minute}
	short := limiter.InFlight{Max: 2, TTL: 1500 * time.Millisecond}
	conc := c.concurrency(long)
	// Three leases of 3 (on the virtual clock 100 ms apart), then an
	// Acquire under Max 1: a slot frees for it when all three have ended.
	virtual := c.h.Caps().VirtualClock
	wide, narrow := limiter.InFlight{Max: 3, TTL: short.TTL}, limiter.InFlight{Max: 1, TTL: short.TTL}
	const apart = 100 * time.Millisecond
	for i := range 3 {
		if i > 0 && virtual {
			c.h.Advance(apart)
		}
		if l, err := conc.Acquire(c.ctx, "p49-lowered", wide); err != nil || !l.Held {
			c.t.Fatalf("property 49: lease %d of 3 = %s, %v; want held", i+1, leaseString(l), err)
		}
	}
	l, err := conc.Acquire(c.ctx, "p49-lowered", narrow)
	if err != nil || l.Held || l.InFlight != 3 || l.RetryAfter <= 0 || l.RetryAfter > short.TTL {
		c.t.Errorf("property 49: an Acquire under Max 1 with 3 leases of %s held = %s, %v; want refused, 3 in flight, RetryAfter in (0, %s]", short.TTL, leaseString(l), err, short.TTL)
	} else if virtual && l.RetryAfter != short.TTL {
		c.t.Errorf("property 49: an Acquire under Max 1 as the third of 3 leases of %s taken %s apart is taken = %s; want RetryAfter %s (the third lease's end: a slot frees for Max 1 only when all three have ended)", short.TTL, apart, leaseString(l), short.TTL)
	}
	key := mustInFlightKey(c, "p49", long)
	if k := mustInFlightKey(c, "p49", short); k != key {
		c.t.Fatalf("property 49: leases of one subject with TTLs %s and %s have the keys %q and %q: the check needs one set", long.TTL, short.TTL, key, k)
	}
	for _, f := range []limiter.InFlight{long, short} {
		if l, err := conc.Acquire(c.ctx, "p49", f); err != nil || !l.Held {
			c.t.Fatalf("property 49: a lease for %s = %s, %v; want held", f.TTL, leaseString(l), err)
		}
	}
	if p := c.pttl(key); p == -1 || time.Duration(p)*time.Millisecond <= short.TTL || time.Duration(p)*time.Millisecond > long.TTL {
		c.t.Errorf("property 49: after a lease for %s beside one for %s, the lease set has PTTL %dms, want in (%s, %s] (it ends with its latest lease)", short.TTL, long.TTL, p, short.TTL, long.TTL)
	}
	// An Acquire abandoned for the long TTL, in a set a short lease made.
	ab, abandons := c.spec.Leaser.(limiter.LeaseAbandoner)
	late := limiter.LeaseRequest{Key: mustInFlightKey(c, "p49-abandoned", long), ID: "late-acquire", Limit: long}
	if abandons {
		if l, err := conc.Acquire(c.ctx, "p49-abandoned", short); err != nil || !l.Held {
			c.t.Fatalf("property 49: a lease for %s = %s, %v; want held", short.TTL, leaseString(l), err)
		}
		if err := ab.Abandon(c.ctx, c.h.Store(), late); err != nil {
			c.t.Fatalf("property 49: Abandon: %v", err)
		}
	}
	c.h.Advance(short.TTL + 10*time.Millisecond)
	l, err = conc.Acquire(c.ctx, "p49", long)
	if err != nil || !l.Held || l.InFlight != 2 {
		c.t.Errorf("property 49: when the lease for %s has ended, an Acquire = %s, %v; want held, 2 in flight (the lease for %s still holds its slot)", short.TTL, leaseString(l), err, long.TTL)
	}
	if l, err := conc.Acquire(c.ctx, "p49", long); err != nil || l.Held || l.RetryAfter <= 0 || l.RetryAfter > long.TTL {
		c.t.Errorf("property 49: a third lease of 2 then = %s, %v; want refused, RetryAfter in (0, %s]", leaseString(l), err, long.TTL)
	}
	if n := c.inFlight("p49", long); n != 2 {
		c.t.Errorf("property 49: the server holds %d leases of a set of 2 full, want 2", n)
	}
	// (the third of the lowered set's leases ended with the short lease)
	if l, err := conc.Acquire(c.ctx, "p49-lowered", narrow); err != nil || !l.Held || l.InFlight != 1 {
		c.t.Errorf("property 49: an Acquire under Max 1 once the 3 leases of %s have ended = %s, %v; want held, alone in flight", short.TTL, leaseString(l), err)
	}
	if !abandons {
		return // property 43 says what is missing
	}
	if st, err := c.spec.Leaser.Acquire(c.ctx, c.h.Store(), late); err != nil || st.Held {
		c.t.Errorf("property 49: an Acquire abandoned for %s, arriving after the %s lease beside its tombstone ended = %+v, %v; want not held (its slot would be held by nobody)", long.TTL, short.TTL, st, err)
	}
	if n := c.inFlight("p49-abandoned", long); n != 0 {
		c.t.Errorf("property 49: after an abandoned Acquire arrived late, the server holds %d leases, want 0", n)
	}
}

// Property 50: an Acquire whose reply is lost (the server ran it, the
// client never learns it) is an error wrapping store.ErrUnknownOutcome,
// and the Concurrency has given the slot it may have taken back before it
// returns: the server holds no lease, and the only slot of the set is
// taken at once by the next caller. The same for a reply lost to a
// connection reset. (A store that reports a lost reply to a script as a
// plain error leaves the slot taken by nobody until its TTL ends.)
func checkLeaseLostReply(c *checker) {
	if c.spec.Commit == "" {
		c.t.Skip("the spec names no commit command")
	}
	f := limiter.InFlight{Max: 1, TTL: time.Minute}
	direct := c.concurrency(f)
	// Load the script through a direct connection first, so that the
	// proxied call's commit command is the one that runs.
	if l, err := direct.Acquire(c.ctx, "p50-warm", f); err != nil || !l.Held {
		c.t.Fatalf("property 50: warm-up = %s, %v", leaseString(l), err)
	} else if err := l.Release(c.ctx); err != nil {
		c.t.Fatalf("property 50: warm-up release: %v", err)
	}
	p, st := c.proxied()
	conc, err := limiter.NewConcurrency(st, c.spec.Leaser, limiter.WithPrefix(c.prefix))
	if err != nil {
		c.t.Fatalf("limiter.NewConcurrency: %v", err)
	}
	for i, fault := range []struct {
		what string
		arm  func(string)
	}{{"lost", p.DropReply}, {"lost to a connection reset", p.ResetReply}} {
		subject := fmt.Sprintf("p50-%d", i)
		fault.arm(c.spec.Commit)
		var l limiter.Lease
		_, err := c.unsentAgain("property 50: an Acquire whose reply is "+fault.what, p, func() (limiter.Result, error) {
			var err error
			l, err = conc.Acquire(c.ctx, subject, f)
			return limiter.Result{Allowed: l.Held}, err
		})
		if !errors.Is(err, store.ErrUnknownOutcome) {
			c.t.Errorf("property 50: an Acquire whose reply was %s = %s, %v; want an error wrapping store.ErrUnknownOutcome", fault.what, leaseString(l), err)
		}
		if n := c.inFlight(subject, f); n != 0 {
			c.t.Errorf("property 50: after an Acquire whose reply was %s returned, the server holds %d leases of its set, want 0 (the slot it may have taken is given back before it returns)", fault.what, n)
		}
		if l, err := direct.Acquire(c.ctx, subject, f); err != nil || !l.Held || l.InFlight != 1 {
			c.t.Errorf("property 50: the next Acquire of the set of 1 whose Acquire's reply was %s = %s, %v; want held, alone in flight", fault.what, leaseString(l), err)
		}
	}
}
