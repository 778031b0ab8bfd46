package conformance

import (
	"fmt"
	"time"

	"github.com/quotagate/limiter"
)

// Property 35: RetryAfter is honoured. With no other caller, a request
// denied with RetryAfter R is admitted when made again R later (Wait relies
// on it): for every shape, at odd offsets into a window or a refill, with
// costs of 1 and 2. On a real clock the check sleeps R and 5 ms more (the
// server's clock and ours are read at different moments), never less.
func checkRetryHonoured(c *checker) {
	virtual := c.h.Caps().VirtualClock
	l := limiter.Limit{Rate: 3, Period: 1100 * time.Millisecond, Name: "r"}
	c.window(l)
	lim := c.limiter(nil)
	rounds := 6
	if !virtual {
		rounds = 2 // a cost of 1 and of 2, each waiting up to a Period
	}
	judged := 0
	for round := range rounds {
		subject := fmt.Sprintf("p35-%d", round)
		c.h.Advance(time.Duration(37+round*173) * time.Millisecond)
		if r, err := lim.AllowN(c.ctx, subject, 3, l); err != nil || !r.Allowed {
			c.t.Fatalf("property 35: round %d: the first AllowN(3) = %+v, %v; want admitted", round, r, err)
		}
		cost := int64(1 + round%2)
		denied, err := lim.AllowN(c.ctx, subject, cost, l)
		switch {
		case err != nil:
			c.t.Fatalf("property 35: round %d: %v", round, err)
		case denied.Allowed && c.spec.Aligned && !virtual:
			continue // an epoch-aligned window ended between the two calls
		case denied.Allowed:
			c.t.Fatalf("property 35: round %d: AllowN(%d) right after the limit was used up was admitted: %+v", round, cost, denied)
		case denied.RetryAfter <= 0 || denied.RetryAfter > c.spec.life(l.Period):
			c.t.Fatalf("property 35: round %d: a denial's RetryAfter is %s, out of (0, %s]", round, denied.RetryAfter, c.spec.life(l.Period))
		}
		wait := denied.RetryAfter
		if !virtual {
			wait += 5 * time.Millisecond
		}
		c.h.Advance(wait)
		judged++
		if r, err := lim.AllowN(c.ctx, subject, cost, l); err != nil || !r.Allowed {
			c.t.Errorf("property 35: round %d: AllowN(%d) denied with RetryAfter %s, made again %s later: %+v, %v; want admitted", round, cost, denied.RetryAfter, wait, r, err)
		}
	}
	if judged == 0 {
		c.t.Errorf("property 35: no round judged: every denial was voided by a window's end")
	}
}

// Property 41: quota comes back exactly. For a strategy that refills one
// unit every Period/Rate (GCRA, token bucket: Spec.Refills without a Bound
// of its own), a limit emptied at t is asked every tenth of an interval:
// the n-th unit is admitted at exactly t + n·Period/Rate, not one step
// later, and each denial on the way has exactly the wait that is left as
// its RetryAfter. Then, half a Period after the last admission (the
// Burst is back after Burst intervals), the whole Burst and not a unit
// more: a bucket whose refill is capped at its Rate instead of its Burst,
// and whose key lives on past full (as one kept a Period after its last
// write does), holds 5 then. A bucket kept in floating point, refilled by
// adding a tenth of a token per call, holds 0.9999999999999999 tokens
// after ten (drift: it under-admits from then on, and with other steps it
// over-admits). Then a limit whose interval is not whole milliseconds, 3
// per second (a unit every 333 333.3 µs), emptied: its first unit is
// denied at 333 ms with a RetryAfter of 1 ms and admitted at 334, its
// second denied at 666 ms and admitted at 667 (a bucket that counts its
// interval in whole milliseconds, 333, refills 3 units in 999 ms and
// admits each early); emptied again, a cost of 2 at 333 ms is denied with
// a RetryAfter of exactly 334 ms, and admitted then (a RetryAfter rounded
// up unit by unit is 335 ms). Exactness to the millisecond needs a clock
// the suite moves: on a real clock the check skips.
func checkRefillExact(c *checker) {
	if !c.spec.Refills || c.spec.Bound != nil {
		c.t.Skip("the strategy declares no refill of one unit every Period/Rate")
	}
	if !c.h.Caps().VirtualClock {
		c.t.Skip("needs a virtual clock: when a unit comes back cannot be observed to the millisecond through a real clock")
	}
	const steps, per = 30, 10 // 10 probes per interval
	l := limiter.Limit{Rate: 10, Period: time.Second, Burst: 3, Name: "q"}
	interval := l.Period / time.Duration(l.Rate)
	step := interval / per
	thirds := limiter.Limit{Rate: 3, Period: time.Second, Burst: 3, Name: "thirds"}
	c.window(l, thirds)
	lim := c.limiter(nil)
	if r, err := lim.AllowN(c.ctx, "p41", l.Burst, l); err != nil || !r.Allowed {
		c.t.Fatalf("property 41: AllowN(%d) on a fresh limit = %+v, %v; want admitted", l.Burst, r, err)
	}
	for s := 1; s <= steps; s++ {
		c.h.Advance(step)
		r, err := lim.Allow(c.ctx, "p41", l)
		if err != nil {
			c.t.Fatalf("property 41: %s after the limit was emptied: %v", time.Duration(s)*step, err)
		}
		due := s%per == 0
		switch {
		case due && !r.Allowed:
			c.t.Fatalf("property 41: %s after the limit (%d per %s, burst %d) was emptied and asked every %s, unit %d was denied (RetryAfter %s): it is due exactly then", time.Duration(s)*step, l.Rate, l.Period, l.Burst, step, s/per, r.RetryAfter)
		case !due && r.Allowed:
			c.t.Fatalf("property 41: %s after the limit (%d per %s, burst %d) was emptied and asked every %s, a unit was admitted %s before it was due", time.Duration(s)*step, l.Rate, l.Period, l.Burst, step, time.Duration(per-s%per)*step)
		case !due && r.RetryAfter != time.Duration(per-s%per)*step:
			c.t.Errorf("property 41: %s after the limit was emptied, a denial's RetryAfter is %s; the next unit is due in exactly %s", time.Duration(s)*step, r.RetryAfter, time.Duration(per-s%per)*step)
		}
	}
	c.h.Advance(l.Period / 2)
	if r, err := lim.AllowN(c.ctx, "p41", l.Burst, l); err != nil || !r.Allowed {
		c.t.Fatalf("property 41: AllowN(%d) half a Period after the last admission = %+v, %v; want admitted (the whole burst is back)", l.Burst, r, err)
	}
	if r, err := lim.Allow(c.ctx, "p41", l); err != nil || r.Allowed {
		c.t.Fatalf("property 41: Allow right after the whole burst of %d was taken = %+v, %v; want denied (a bucket holds at most its burst)", l.Burst, r, err)
	}

	if r, err := lim.AllowN(c.ctx, "p41-thirds", thirds.Burst, thirds); err != nil || !r.Allowed {
		c.t.Fatalf("property 41: AllowN(%d) on a fresh limit of %d per %s = %+v, %v; want admitted", thirds.Burst, thirds.Rate, thirds.Period, r, err)
	}
	at := time.Duration(0)
	for n := time.Duration(1); n <= 2; n++ {
		exact := thirds.Period * n / time.Duration(thirds.Rate) // 333.333ms, 666.666ms
		due := exact.Truncate(time.Millisecond) + time.Millisecond
		c.h.Advance(due - time.Millisecond - at)
		r, err := lim.Allow(c.ctx, "p41-thirds", thirds)
		if err != nil {
			c.t.Fatalf("property 41: %d per %s, %s after it was emptied: %v", thirds.Rate, thirds.Period, due-time.Millisecond, err)
		}
		if r.Allowed || r.RetryAfter != time.Millisecond {
			c.t.Fatalf("property 41: %d per %s, %s after it was emptied = %+v; want denied, RetryAfter 1ms (unit %d is due at %s)", thirds.Rate, thirds.Period, due-time.Millisecond, r, n, exact)
		}
		c.h.Advance(time.Millisecond)
		at = due
		if r, err := lim.Allow(c.ctx, "p41-thirds", thirds); err != nil || !r.Allowed {
			c.t.Fatalf("property 41: %d per %s, %s after it was emptied = %+v, %v; want admitted (unit %d came back at %s)", thirds.Rate, thirds.Period, due, r, err, n, exact)
		}
	}
	// A cost of 2 waits for both units: emptied, 333 ms later AllowN(2) is
	// denied with a RetryAfter of exactly 334 ms (the second unit is due
	// at 666.7 ms), and admitted then.
	if r, err := lim.AllowN(c.ctx, "p41-pair", thirds.Burst, thirds); err != nil || !r.Allowed {
		c.t.Fatalf("property 41: AllowN(%d) on a fresh limit of %d per %s = %+v, %v; want admitted", thirds.Burst, thirds.Rate, thirds.Period, r, err)
	}
	c.h.Advance(333 * time.Millisecond)
	wait := (2*thirds.Period/time.Duration(thirds.Rate) - 333*time.Millisecond + time.Millisecond - 1).Truncate(time.Millisecond)
	if r, err := lim.AllowN(c.ctx, "p41-pair", 2, thirds); err != nil || r.Allowed || r.RetryAfter != wait {
		c.t.Fatalf("property 41: %d per %s, 333ms after it was emptied, AllowN(2) = %+v, %v; want denied, RetryAfter %s (unit 2 is due at %s)", thirds.Rate, thirds.Period, r, err, wait, 2*thirds.Period/time.Duration(thirds.Rate))
	}
	c.h.Advance(wait)
	if r, err := lim.AllowN(c.ctx, "p41-pair", 2, thirds); err != nil || !r.Allowed {
		c.t.Fatalf("property 41: %d per %s, %s after it was emptied, AllowN(2) = %+v, %v; want admitted (unit 2 came back at %s)", thirds.Rate, thirds.Period, 333*time.Millisecond+wait, r, err, 2*thirds.Period/time.Duration(thirds.Rate))
	}
	// Such a bucket holds at most its burst too, while its key lives on
	// past the moment it is full again: emptied, 999 ms later one unit
	// taken (a key may then live for twice the wait for that unit), then
	// 669 ms more (1.997 units left, 2.007 back): exactly Burst admitted in
	// a row. (A bucket that adds what came back without capping it at its
	// burst admitted 4.)
	if r, err := lim.AllowN(c.ctx, "p41-cap", thirds.Burst, thirds); err != nil || !r.Allowed {
		c.t.Fatalf("property 41: AllowN(%d) on a fresh limit of %d per %s = %+v, %v; want admitted", thirds.Burst, thirds.Rate, thirds.Period, r, err)
	}
	c.h.Advance(999 * time.Millisecond)
	if r, err := lim.Allow(c.ctx, "p41-cap", thirds); err != nil || !r.Allowed {
		c.t.Fatalf("property 41: %d per %s, 999ms after it was emptied = %+v, %v; want admitted", thirds.Rate, thirds.Period, r, err)
	}
	c.h.Advance(669 * time.Millisecond)
	for n := int64(0); ; n++ {
		r, err := lim.Allow(c.ctx, "p41-cap", thirds)
		if err != nil {
			c.t.Fatalf("property 41: %d per %s, call %d in a row when full again: %v", thirds.Rate, thirds.Period, n+1, err)
		}
		if r.Allowed && n < thirds.Burst {
			continue
		}
		if r.Allowed {
			n++ // one more than the burst
		}
		if n != thirds.Burst {
			c.t.Errorf("property 41: %d per %s, burst %d, full again: %d calls in a row admitted; want exactly the burst (a bucket holds at most its burst)", thirds.Rate, thirds.Period, thirds.Burst, n)
		}
		break
	}
}
