package conformance

import (
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// Property 42: a quota lease's unused units go back to the window they
// were counted in, and to no other. For a strategy that gives units back
// (limiter.QuotaReturner): a process leases 10 units of 100/hour, admits
// one and gives 9 back (Limiter.ReturnLeases), and another process then
// admits exactly the other 99, not a unit more. A return named for a
// window that was deleted and counted anew since (its end moved) is
// refused and leaves the new window's count as it is, as is a return of
// more units than the window counts; a return to the window that is
// named takes exactly its units off.
func checkLeaseReturn(c *checker) {
	rq, ok := c.spec.Strategy.(limiter.QuotaReturner)
	if !ok {
		c.t.Skip("the strategy gives no leased units back (limiter.QuotaReturner)")
	}
	l := limiter.PerHour(100)
	c.window(l)
	leased := c.limiter(nil, limiter.WithQuotaLease(10))
	direct := c.limiter(nil)
	start := time.Now()
	if r, err := leased.Allow(c.ctx, "p42", l); err != nil || !r.Allowed || !r.Leased {
		c.t.Fatalf("property 42: first call with leases of 10 = %+v, %v; want admitted from a lease", r, err)
	}
	if c.h.Caps().VirtualClock {
		// the lease's end is measured on this process's clock: the
		// server's moves with it here
		c.h.Advance(time.Since(start))
	}
	n, err := leased.ReturnLeases(c.ctx, 0)
	if err != nil || n != 9 {
		c.t.Fatalf("property 42: ReturnLeases after 1 of a lease of 10 was used = %d, %v; want 9", n, err)
	}
	if r, err := direct.AllowN(c.ctx, "p42", 99, l); err != nil || !r.Allowed {
		c.t.Errorf("property 42: AllowN(99) of 100/hour after 1 admitted and 9 given back = %+v, %v; want admitted", r, err)
	}
	for _, lim := range []*limiter.Limiter{direct, leased} {
		if r, err := lim.Allow(c.ctx, "p42", l); err != nil || r.Allowed {
			c.t.Errorf("property 42: a call past 1 + 99 admitted of 100/hour = %+v, %v; want denied (the return gave back more than it leased)", r, err)
		}
	}

	key, err := limiter.Key(c.prefix, "p42-anew", l)
	if err != nil {
		c.t.Fatal(err)
	}
	if r, err := direct.AllowN(c.ctx, "p42-anew", 10, l); err != nil || !r.Allowed {
		c.t.Fatalf("property 42: AllowN(10) = %+v, %v", r, err)
	}
	at := func(units int64) limiter.Request {
		return limiter.Request{Keys: []string{key}, Limits: []limiter.Limit{l}, Cost: units}
	}
	end, left, err := rq.WindowEnd(c.ctx, c.h.Store(), at(0))
	if err != nil || end <= 0 || left <= 0 || left > time.Hour {
		c.t.Fatalf("property 42: WindowEnd of a window of 1h = %d, %s, %v; want its end and (0, 1h] left", end, left, err)
	}
	// The window is deleted (a Reset, an eviction) and counted anew: 5
	// units in a window whose end is 10 s from the first's.
	for _, cmd := range []store.Cmd{{Name: "DEL", Args: []any{key}}, {Name: "SET", Args: []any{key, 5, "PX", (left - 10*time.Second).Milliseconds()}}} {
		if r, err := c.do(cmd); err != nil || r.Err != nil {
			c.t.Fatalf("%s %s: %v %v", cmd.Name, key, err, r.Err)
		}
	}
	if ok, err := rq.ReturnQuota(c.ctx, c.h.Store(), at(3), end); err != nil || ok || c.count(key) != 5 {
		c.t.Errorf("property 42: 3 units returned to the window that ended at %d, after it was deleted and counted anew (5 units, another end) = %v, %v, count %d; want refused, 5 (the units were not counted in this window)", end, ok, err, c.count(key))
	}
	end2, _, err := rq.WindowEnd(c.ctx, c.h.Store(), at(0))
	if err != nil || end2 == end {
		c.t.Fatalf("property 42: WindowEnd of the window counted anew = %d, %v; want an end other than %d", end2, err, end)
	}
	if ok, err := rq.ReturnQuota(c.ctx, c.h.Store(), at(6), end2); err != nil || ok || c.count(key) != 5 {
		c.t.Errorf("property 42: 6 units returned to a window that counts 5 = %v, %v, count %d; want refused, 5", ok, err, c.count(key))
	}
	if ok, err := rq.ReturnQuota(c.ctx, c.h.Store(), at(2), end2); err != nil || !ok || c.count(key) != 3 {
		c.t.Errorf("property 42: 2 units returned to the window that counts 5 = %v, %v, count %d; want given back, 3", ok, err, c.count(key))
	}
}
