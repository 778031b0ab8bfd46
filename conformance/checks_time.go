package conformance

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/quotagate/limiter"
)

// Property 13: app clock skew does not matter. Three limiters whose
// strategies read app clocks 5 s apart (now, +5 s, -5 s) take turns on one
// subject: together they admit exactly the limit, in one counter, as one
// limiter would; again in the next window. A strategy that reads no app
// clock (Spec.Clocked nil) runs the same check with three instances of it.
func checkClockSkew(c *checker) {
	const rate = 4
	l := limiter.Per(rate, time.Second)
	c.window(l)
	skews := []time.Duration{0, 5 * time.Second, -5 * time.Second}
	lims := make([]*limiter.Limiter, len(skews))
	for i, skew := range skews {
		s := c.spec.Strategy
		if c.spec.Clocked != nil {
			s = c.spec.Clocked(func() time.Time { return time.Now().Add(skew) })
		}
		lims[i] = c.limiterOf(nil, s)
	}
	if c.spec.Clocked == nil {
		c.t.Log("property 13: the strategy reads no app clock; three instances must share one counter")
	}
	// On a real clock a round whose calls outlast the quiet time (on a
	// busy machine) is run again, on a fresh subject, up to twice: calls
	// that straddle an epoch-aligned window's end, or that run longer
	// than a first-request window or than one unit's refill, may rightly
	// admit more than the limit.
	quiet := l.Period
	if c.spec.Refills {
		quiet = refillTime(l, 1)
	}
	virtual := c.h.Caps().VirtualClock
	straddles := 0
	for round := 0; round < 2; round++ {
		subject := fmt.Sprintf("p13-%d-%d", round, straddles)
		c.window(l)
		var before int64
		if c.spec.Aligned {
			before = c.serverTime().UnixMilli() / l.Period.Milliseconds()
		}
		var got []string
		admitted := 0
		start := time.Now()
		for i := range 3 * rate {
			r, err := lims[i%3].Allow(c.ctx, subject, l)
			if err != nil {
				c.t.Fatalf("property 13: round %d, call %d (app clock %+v): %v", round, i, skews[i%3], err)
			}
			mark := "-"
			if r.Allowed {
				mark = "A"
				admitted++
			}
			got = append(got, mark)
		}
		took := time.Since(start)
		// The keys before the clock: a key that expires at its window's
		// end (no grace) is gone once the window is, and then the clock
		// read after the listing says the round straddled.
		ks := c.subjectKeys(subject)
		straddled := c.spec.Aligned && c.serverTime().UnixMilli()/l.Period.Milliseconds() != before
		if !virtual && !c.spec.Aligned && took >= quiet {
			straddled = true
		}
		if straddled && straddles < 3 {
			// Again, with a period twice as long: a machine this slow
			// needs more time for 12 calls.
			straddles++
			l.Period *= 2
			quiet *= 2
			c.window(l)
			c.t.Logf("property 13: round %d's %d calls took %s and straddled a window's end or a refill; running it again with %s", round, 3*rate, took, l)
			round--
			continue
		}
		if admitted != rate || slices.Index(got, "-") != rate {
			c.t.Errorf("property 13: round %d: limiters with app clocks 0, +5s, -5s taking turns decided %v in %s; want the first %d admitted, then all denied (one counter)", round, got, took, rate)
		}
		if len(ks) != 1 {
			c.t.Errorf("property 13: round %d: the skewed limiters counted in %d keys %q; want one", round, len(ks), ks)
		}
		if round == 0 {
			c.h.Advance(l.Period)
		}
	}
}

// localMu serialises changes of time.Local by property 14.
var localMu sync.Mutex

// withLocal runs fn with time.Local's zone set to loc, then restores it.
// It changes the Location time.Local points to rather than the variable,
// which time.Now reads on every goroutine.
func withLocal(loc *time.Location, fn func()) {
	localMu.Lock()
	defer localMu.Unlock()
	_ = time.Local.String() // load the local zone now, so it cannot overwrite ours later
	saved := *time.Local
	*time.Local = *loc
	defer func() { *time.Local = saved }()
	fn()
}

// Property 14: keys use the epoch, not time zones. At one instant, calls
// made under four different time.Local zones count in the same keys, for a
// minute's limit and a day's (whose local dates differ: UTC+14 and
// UTC-03:30 are 17.5 hours apart).
//
// The zones are the app's, whatever the backend, and changing time.Local
// stops every other check while it runs: the check runs on a virtual
// clock's backend (the embedded miniredis) and skips on the others.
func checkTimeZones(c *checker) {
	if !c.h.Caps().VirtualClock {
		c.t.Skip("the zones are the app's, not the server's: checked on the embedded backend, where the other checks need not stop for it")
	}
	l := limiter.PerMinute(100)
	day := limiter.PerDay(1000)
	c.window(l, day)
	lim := c.limiter(nil)
	zones := []*time.Location{
		time.UTC,
		time.FixedZone("UTC+05:45", 5*3600+45*60),
		time.FixedZone("UTC-03:30", -(3*3600 + 30*60)),
		time.FixedZone("UTC+14", 14*3600),
	}
	var first []string
	for i, z := range zones {
		var r limiter.Result
		var err error
		withLocal(z, func() { r, err = lim.Allow(c.ctx, "p14", l, day) })
		if err != nil || !r.Allowed {
			c.t.Fatalf("property 14: time.Local %s: %+v, %v; want admitted", z, r, err)
		}
		ks := c.subjectKeys("p14")
		if i == 0 {
			first = ks
		} else if !slices.Equal(ks, first) {
			c.t.Errorf("property 14: after a call under time.Local %s the counters are %q; under UTC they were %q: keys depend on the time zone", z, ks, first)
		}
	}
	if len(first) != 2 {
		c.t.Errorf("property 14: two limits counted in %d keys %q", len(first), first)
	}
	for _, l := range []limiter.Limit{l, day} {
		if n := c.counter("p14", l); n != int64(len(zones)) {
			c.t.Errorf("property 14: %s: counter %d after %d admitted calls under different zones", l, n, len(zones))
		}
	}
}

// Property 15: boundary bursts are as documented. A pseudo-random load
// (0 to 2L requests per step) runs for several periods; for every k, the
// admissions that certainly fall within one interval of k periods number at
// most (k+1)·L for a fixed window (the 2L boundary burst for k = 1), or
// k·L + Burst for a smooth strategy. On a virtual clock admission times are
// exact; on a real one each is bounded by its call's send and reply times
// and only admissions certainly inside one interval are counted together.
func checkBoundaryBursts(c *checker) {
	virtual := c.h.Caps().VirtualClock
	const rate = 5
	period, step, steps := 1500*time.Millisecond, 100*time.Millisecond, 90
	if !virtual {
		period, step, steps = 300*time.Millisecond, 30*time.Millisecond, 50
	}
	l := limiter.Per(rate, period)
	c.window(l)
	lim := c.limiter(nil)
	type span struct{ lo, hi time.Duration } // bounds on an admission's time
	var adm []span
	start := time.Now()
	var vt time.Duration // virtual time since start
	clock := func() time.Duration {
		if virtual {
			return vt
		}
		return time.Since(start)
	}
	for s := range steps {
		burst := (s*s + 3*s) % (2*rate + 1)
		for range burst {
			lo := clock()
			r, err := lim.Allow(c.ctx, "p15", l)
			if err != nil {
				c.t.Fatalf("property 15: step %d: %v", s, err)
			}
			if r.Allowed {
				adm = append(adm, span{lo, clock()})
			}
		}
		if virtual {
			c.h.Advance(step)
			vt += step
		} else {
			time.Sleep(time.Until(start.Add(time.Duration(s+1) * step)))
		}
	}
	total := time.Duration(steps) * step
	for k := 1; time.Duration(k)*period <= total; k++ {
		iv := time.Duration(k) * period
		bound := c.spec.MaxAdmitted(l, iv)
		worst, at := 0, time.Duration(0)
		for i := range adm {
			n := 0
			for j := i; j < len(adm) && adm[j].lo < adm[i].lo+iv; j++ {
				if adm[j].hi < adm[i].lo+iv {
					n++
				}
			}
			if n > worst {
				worst, at = n, adm[i].lo
			}
		}
		if int64(worst) > bound {
			c.t.Errorf("property 15: %d admitted within %s from %s (limit %d per %s): more than the documented %d in any interval of %d period(s)", worst, iv, at, rate, period, bound, k)
		}
	}
	if len(adm) == 0 {
		c.t.Errorf("property 15: nothing admitted")
	}
}
