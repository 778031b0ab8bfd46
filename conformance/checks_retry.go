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
