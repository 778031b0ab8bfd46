package conformance

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/quotagate/limiter"
)

// Property 48: every decision is the refill model's. For a strategy that
// refills one unit every Period/Rate (GCRA, token bucket: Spec.Refills
// without a Bound of its own), a seeded random walk on the virtual clock
// of calls (costs from 0 to a burst and one more, Peeks, one limit or two
// of three, two subjects) and clock moves (1 ms to 2.5 s) is decided as
// the model decides it: each limit of a subject keeps the instant it is
// full again (the theoretical arrival time, TAT; a fresh limit is full), a
// call of cost c at now fits a limit of interval I = Period/Rate and burst
// B when c ≤ B and max(TAT, now) + c·I ≤ now + B·I, is admitted when it
// fits every limit, and then moves each TAT to max(TAT, now) + c·I; each
// limit's Remaining is the whole units between its TAT and now + B·I, its
// ResetAfter the time until its TAT, its RetryAfter 0 when it fits, -1 for
// c > B, else the time until it fits; the Result binds them as
// limiter.Binder does. Every field must be the model's to the millisecond:
// Allowed, Remaining, ResetAfter, RetryAfter and the binding limit's
// Index. The intervals are whole milliseconds (100, 250 and 400 ms), as
// are the clock's moves, so no rounding is allowed for. The checks before
// it bound what is admitted; this one holds what a decision reports to
// the algorithm, where a strategy that rounds its refill, forgets a
// limit's burst once the limit was emptied, or reports the binding
// limit's reset from before the admission still admits within the bounds.
// Exactness to the millisecond needs a clock the suite moves: on a real
// clock the check skips.
func checkRefillModel(c *checker) {
	if !c.spec.Refills || c.spec.Bound != nil {
		c.t.Skip("the strategy declares no refill of one unit every Period/Rate")
	}
	if !c.h.Caps().VirtualClock {
		c.t.Skip("needs a virtual clock: a decision's times cannot be predicted to the millisecond through a real clock")
	}
	limits := []limiter.Limit{
		{Rate: 10, Period: time.Second, Burst: 4, Name: "a"}, // a unit every 100 ms
		{Rate: 4, Period: time.Second, Burst: 7, Name: "b"},  // 250 ms
		{Rate: 5, Period: 2 * time.Second, Name: "c"},        // 400 ms, a burst of its rate
	}
	c.window(limits...)
	sets := [][]int{{0}, {1}, {2}, {0, 1}, {1, 2}, {2, 0}}
	moves := []time.Duration{time.Millisecond, 7 * time.Millisecond, 50 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond, 101 * time.Millisecond, 250 * time.Millisecond, 333 * time.Millisecond, time.Second, 2500 * time.Millisecond}
	lim := c.limiter(nil)
	rng := rand.New(rand.NewPCG(48, 48))
	// tat[subject][limit]: when the limit is full again, since the walk
	// began (at most now: full)
	var tat [2][3]time.Duration
	now := time.Duration(0)
	var history []string // the walk so far, for a failure's message
	const steps = 400
	for step := range steps {
		if rng.IntN(10) < 3 {
			d := moves[rng.IntN(len(moves))]
			c.h.Advance(d)
			now += d
			history = append(history, "+"+d.String())
			continue
		}
		subject := rng.IntN(2)
		set := sets[rng.IntN(len(sets))]
		ls := make([]limiter.Limit, len(set))
		least := int64(1 << 62)
		for i, li := range set {
			ls[i] = limits[li]
			least = min(least, burst(limits[li]))
		}
		peek := rng.IntN(6) == 0
		cost := []int64{0, 1, 1, 1, 1, 2, 3, least, least + 1, 8}[rng.IntN(10)]
		key := fmt.Sprintf("p48-%d", subject)
		var got limiter.Result
		var err error
		call := fmt.Sprintf("AllowN(%s, %d, %s)", key, cost, names(ls))
		if peek {
			cost = 1
			call = fmt.Sprintf("Peek(%s, %s)", key, names(ls))
			got, err = lim.Peek(c.ctx, key, ls...)
		} else {
			got, err = lim.AllowN(c.ctx, key, cost, ls...)
		}
		history = append(history, call)
		if err != nil {
			c.t.Fatalf("property 48: step %d at %s: %s: %v", step, now, call, err)
		}

		// The model's decision: a limit fits when the cost is within its
		// burst and over, how far past the limit's full point the cost
		// would take its TAT, is not positive.
		type model struct{ interval, full, from, over time.Duration }
		per := make([]model, len(set))
		allowed := true
		for i, li := range set {
			l := limits[li]
			m := model{interval: l.Period / time.Duration(l.Rate), from: max(tat[subject][li], now)}
			m.full = now + time.Duration(burst(l))*m.interval
			m.over = m.from + time.Duration(cost)*m.interval - m.full
			per[i] = m
			allowed = allowed && cost <= burst(l) && m.over <= 0
		}
		var b limiter.Binder
		for i, li := range set {
			m := per[i]
			after := m.from
			if allowed && !peek {
				after += time.Duration(cost) * m.interval
				tat[subject][li] = after
			}
			retry := time.Duration(0)
			switch {
			case cost > burst(limits[li]):
				retry = -1
			case m.over > 0:
				retry = m.over
			}
			b.Add(i, int64((m.full-after)/m.interval), after-now, retry)
		}
		want := b.Result(allowed)
		if got.Allowed != want.Allowed || got.Remaining != want.Remaining || got.ResetAfter != want.ResetAfter || got.RetryAfter != want.RetryAfter || got.Index != want.Index {
			if len(history) > 12 {
				history = append([]string{"..."}, history[len(history)-12:]...)
			}
			c.t.Fatalf("property 48: step %d at %s, %s = {Allowed:%v Remaining:%d ResetAfter:%s RetryAfter:%s Index:%d}; the refill model (a unit back every Period/Rate, a fresh limit full, the binding limit as limiter.Binder picks it) decides {Allowed:%v Remaining:%d ResetAfter:%s RetryAfter:%s Index:%d}; the walk: %s",
				step, now, call, got.Allowed, got.Remaining, got.ResetAfter, got.RetryAfter, got.Index,
				want.Allowed, want.Remaining, want.ResetAfter, want.RetryAfter, want.Index, strings.Join(history, ", "))
		}
	}
}

// names lists limits by name and rate, for a failure's message.
func names(ls []limiter.Limit) string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = fmt.Sprintf("%s %d/%s burst %d", l.Name, l.Rate, l.Period, burst(l))
	}
	return "[" + strings.Join(s, ", ") + "]"
}
