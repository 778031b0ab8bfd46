package conformance

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/storetest"
)

// Property 44: for a strategy whose quota may be leased
// (limiter.WindowQuota), an admitted single-limit decision's ResetAfter
// ends no later than the window it was counted in, on the server's clock:
// a quota lease admits until then, so a longer one would admit units
// counted in a window after it has ended. Replies come back 30 ms late (a
// strategy that estimates the server's clock from round trips errs by
// half of one); five calls 100 ms apart of 1000 per minute, each timed
// against the server's clock read just before it is sent (so the server's
// clock when it was sent is no earlier), the window's end read from the
// server (the epoch's next multiple of the period for an epoch-aligned
// strategy, else the latest end its counter's expiry allows).
func checkWindowQuotaReset(c *checker) {
	if _, ok := c.spec.Strategy.(limiter.WindowQuota); !ok {
		c.t.Skip("the strategy's quota is not leased (limiter.WindowQuota)")
	}
	l := limiter.PerMinute(1000)
	c.window(l)
	// On a virtual clock the server's moves only with Advance: a strategy
	// that reads the app's clock, and the Limiter (whose quota leases live
	// on the app's clock), get one that moves with it.
	var advanced atomic.Int64
	s := c.spec.Strategy
	virtual := c.h.Caps().VirtualClock
	var opts []limiter.Option
	if virtual {
		clock := func() time.Time { return time.Now().Add(time.Duration(advanced.Load())) }
		opts = append(opts, limiter.WithClock(clock))
		if c.spec.Clocked != nil {
			s = c.spec.Clocked(clock)
		}
	}
	lim := c.limiterOf(storetest.Late(c.h.Store(), 30*time.Millisecond), s, opts...)
	// scripts loaded first, the server's clock read once
	if _, err := lim.Allow(c.ctx, "p44-warm-up", l); err != nil {
		c.t.Fatalf("property 44: %v", err)
	}
	p := l.Period.Milliseconds()
	for i := range 5 {
		c.h.Advance(100 * time.Millisecond)
		if virtual {
			advanced.Add(int64(100 * time.Millisecond))
		}
		before := c.serverTime().UnixMilli()
		r, err := lim.Allow(c.ctx, "p44", l)
		if err != nil || !r.Allowed {
			c.t.Fatalf("property 44: call %d of 1000 per minute = %+v, %v; want admitted", i, r, err)
		}
		var end int64
		if c.spec.Aligned {
			end = (before/p + 1) * p
		} else {
			var longest string
			var most int64 = -1
			for k, ms := range c.ttls() {
				if ms > most && strings.Contains(k, "{p44}") {
					longest, most = k, ms
				}
			}
			if longest == "" {
				c.t.Fatalf("property 44: call %d: no key with a TTL", i)
			}
			_, hi, ok := c.expireTime(longest)
			if !ok {
				c.t.Skipf("property 44: the server tells no key's expiry (PEXPIRETIME, or TIME and PTTL in a script)")
			}
			end = hi
		}
		if over := before + r.ResetAfter.Milliseconds() - end; over > 1 {
			c.t.Errorf("property 44: call %d: ResetAfter %s from the server's clock before the call (%d ms) ends %d ms after its window (%d ms): a quota lease would admit units of a window that has ended", i, r.ResetAfter, before, over, end)
		}
	}
}
