package conformance

import (
	"fmt"
	"time"

	"github.com/quotagate/limiter"
)

// Property 47: Reset forgets every limit of its subject, and nothing else.
// A subject used up under two limits, and another under three, are Reset
// with their limits: each is admitted at once with the whole of its
// tightest limit left, while a third subject, asked as often under the same
// limits, is not reset (its count is where it was).
func checkReset(c *checker) {
	a := limiter.Limit{Rate: 3, Period: time.Minute, Name: "a"}
	b := limiter.Limit{Rate: 2, Period: time.Minute, Name: "b"}
	d := limiter.Limit{Rate: 4, Period: 2 * time.Minute, Name: "d"}
	c.window(a, b, d)
	lim := c.limiter(nil)
	// (a unit of b refills in 30 s: none while these run)
	exact := c.spec.LeaseUnits == 0
	for _, ls := range [][]limiter.Limit{{a, b}, {d, a, b}} {
		subject, other := fmt.Sprintf("p47-%d", len(ls)), fmt.Sprintf("p47-other-%d", len(ls))
		for _, s := range []string{subject, other} {
			for i := range 3 { // 2 admitted (b), then denied by b
				r, err := lim.Allow(c.ctx, s, ls...)
				if err != nil || r.Allowed != (i < 2) {
					c.t.Fatalf("property 47: %s: call %d of %v = %+v, %v; want allowed=%v", s, i+1, ls, r, err, i < 2)
				}
			}
		}
		if err := lim.Reset(c.ctx, subject, ls...); err != nil {
			c.t.Fatalf("property 47: Reset(%s, %v): %v", subject, ls, err)
		}
		r, err := lim.Allow(c.ctx, subject, ls...)
		if err != nil || !r.Allowed || (exact && r.Remaining != b.Rate-1) {
			c.t.Errorf("property 47: %s after Reset with %v: %+v, %v; want admitted with %d remaining (every limit forgotten)", subject, ls, r, err, b.Rate-1)
		}
		if r, err := lim.Peek(c.ctx, other, ls...); err != nil || r.Allowed || r.Limit != b {
			c.t.Errorf("property 47: %s, not reset, after another subject's Reset: Peek = %+v, %v; want denied by %s (its count kept)", other, r, err, b)
		}
	}
}
