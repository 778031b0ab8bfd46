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
	if c.spec.Aligned {
		c.leaseReturnAligned(rq, at, end)
		return
	}
	// The window is deleted (a Reset, an eviction) and counted anew: 5
	// units in a window whose end is 10 s before the first's (a shorter
	// period), then in one whose end is 500 ms after it (a window started
	// later).
	for _, off := range []time.Duration{-10 * time.Second, 500 * time.Millisecond} {
		c.leaseReturnAnew(rq, key, at, end, left+off)
	}
}

// leaseReturnAnew is a step of property 42's second half: the window of
// key, which ended at end, is deleted and counted anew, 5 units expiring
// in px. Units returned to the old window are refused; to the new one,
// exactly what it counts may be given back.
func (c *checker) leaseReturnAnew(rq limiter.QuotaReturner, key string, at func(int64) limiter.Request, end int64, px time.Duration) {
	for _, cmd := range []store.Cmd{{Name: "DEL", Args: []any{key}}, {Name: "SET", Args: []any{key, 5, "PX", px.Milliseconds()}}} {
		if r, err := c.do(cmd); err != nil || r.Err != nil {
			c.t.Fatalf("%s %s: %v %v", cmd.Name, key, err, r.Err)
		}
	}
	if ok, err := rq.ReturnQuota(c.ctx, c.h.Store(), at(3), end); err != nil || ok || c.count(key) != 5 {
		c.t.Errorf("property 42: 3 units returned to the window that ended at %d, after it was deleted and counted anew (5 units, expiring in %s) = %v, %v, count %d; want refused, 5 (the units were not counted in this window)", end, px, ok, err, c.count(key))
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
	if ok, err := rq.ReturnQuota(c.ctx, c.h.Store(), at(3), end2); err != nil || !ok || c.count(key) != 0 {
		c.t.Errorf("property 42: 3 units returned to the window that counts 3 = %v, %v, count %d; want given back, 0", ok, err, c.count(key))
	}
}

// leaseReturnAligned is the second half of property 42 for epoch-aligned
// windows, which a key names by their index: subject p42-anew has 10 units
// counted in the window that ends at end. A return named for the window
// before it (ended) is refused and leaves the count as it is, as is a
// return of more units than the window counts; a return to the window
// takes exactly its units off; and once the window's counter is deleted, a
// return to it is refused and creates nothing (no counter below 0 that
// would admit more than the Rate).
func (c *checker) leaseReturnAligned(rq limiter.QuotaReturner, at func(int64) limiter.Request, end int64) {
	l := at(0).Limits[0]
	subject := "p42-anew"
	for _, try := range []struct {
		units, end int64
		ok         bool
		want       int64
		what       string
	}{
		{3, end - l.Period.Milliseconds(), false, 10, "to the window before, which ended"},
		{11, end, false, 10, "to the window, which counts 10"},
		{4, end, true, 6, "to the window, which counts 10"},
		{6, end, true, 0, "to the window, which counts 6"},
	} {
		ok, err := rq.ReturnQuota(c.ctx, c.h.Store(), at(try.units), try.end)
		if n := c.counter(subject, l); err != nil || ok != try.ok || n != try.want {
			c.t.Errorf("property 42: %d units returned %s = %v, %v, count %d; want %v, %d", try.units, try.what, ok, err, n, try.ok, try.want)
		}
	}
	for _, k := range c.subjectKeys(subject) {
		_, _ = c.do(store.Cmd{Name: "DEL", Args: []any{k}})
	}
	ok, err := rq.ReturnQuota(c.ctx, c.h.Store(), at(2), end)
	if left := c.subjectKeys(subject); err != nil || ok || len(left) > 0 {
		c.t.Errorf("property 42: 2 units returned to a window whose counter was deleted = %v, %v, keys %q; want refused, no key", ok, err, left)
	}
}
