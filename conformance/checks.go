package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// Property 1: exact admission under contention. A call whose outcome is
// unknown (a reply lost or late on a busy machine) may or may not have
// been counted: it is counted apart, and the server's counter must lie
// between the admitted and the admitted plus the unknown.
func checkExactAdmission(c *checker) {
	rate := int64(1000)
	g, m := 200, 50
	switch {
	case raceEnabled && c.spec.Optimistic != nil:
		// An optimistic strategy's 200 callers on one key abort about 200
		// transactions per admission: under the race detector on a busy
		// 2-core machine some caller loses every race for minutes. 50
		// callers contend as surely at a quarter of the work.
		g, m = 50, 40
	case raceEnabled:
		m = 10 // still twice the limit, raced for by 200 callers
	}
	if raceEnabled && c.h.Caps().VirtualClock {
		// The embedded server runs one command at a time and, under the
		// race detector, compiles a script's Lua on every call (a few ms
		// each): a limit of 200, twice that many calls, raced for by as
		// many callers as above.
		rate, m = 200, 400/g
	}
	l := limiter.PerHour(rate)
	c.window(l)
	lim := c.limiter(nil)
	start := time.Now()
	a, d, errs := hammer(g, m, func(int, int) (limiter.Result, error) {
		return c.underLoad(func(ctx context.Context) (limiter.Result, error) { return lim.Allow(ctx, "p1", l) })
	})
	rf := c.refill(l, start)
	// An optimistic strategy may give up under contention (ErrContention,
	// never an admission: property 32), having counted nothing: with 200
	// callers on one key a caller can lose every race until its deadline.
	// Such a call is a denial here, not a failure.
	var gaveUp int64
	if c.spec.Optimistic != nil {
		errs = slices.DeleteFunc(errs, func(err error) bool {
			if errors.Is(err, limiter.ErrContention) && !errors.Is(err, store.ErrUnknownOutcome) {
				gaveUp++
				return true
			}
			return false
		})
		d += gaveUp
	}
	unknown := c.unknownOutcomes("property 1", g*m, errs)
	c.t.Logf("property 1: %d admitted, %d denied (%d of them gave up under contention), %d errors; the slowest call took %s", a, d, gaveUp, len(errs), time.Duration(c.slowest.Load()).Round(time.Millisecond))
	if a > rate+rf || (c.spec.Exact && a+unknown < rate) {
		c.t.Errorf("property 1: admitted %d (and %d calls whose outcome is unknown) of %d calls with limit %d (%d refilled while they ran), want %s %d",
			a, unknown, g*m, rate, rf, map[bool]string{true: "exactly", false: "at most"}[c.spec.Exact], rate)
	}
	if a+d+int64(len(errs)) != int64(g*m) {
		c.t.Errorf("property 1: %d admitted + %d denied + %d errors != %d calls", a, d, len(errs), g*m)
	}
	if c.spec.Counter && !c.spec.DeniedConsume {
		n := c.counter("p1", l)
		switch {
		case n < a:
			c.t.Errorf("property 1: server counter %d < %d admitted (admissions not counted)", n, a)
		case n > a+unknown:
			c.t.Errorf("property 1: server counter %d > %d admitted + %d calls whose outcome is unknown (denied requests consumed quota)", n, a, unknown)
		case c.spec.Exact && n != rate:
			c.t.Errorf("property 1: server counter %d after %d calls, want exactly %d", n, g*m, rate)
		}
	} else if c.spec.Exact {
		// The state says the limit is used up, but for what came back.
		if r, err := lim.Peek(c.ctx, "p1", l); err != nil || r.Remaining > c.refill(l, start) {
			c.t.Errorf("property 1: Peek after the run = %+v, %v; want at most %d remaining (what came back since the start)", r, err, c.refill(l, start))
		}
	}
}

// loadTimeout is the deadline of each call of a check that counts under
// load, and it is long: on a busy 2-core machine running the race
// detector, an optimistic strategy's call on a key 200 callers contend for
// may retry for tens of seconds, and an exact check must not turn that
// into an error. A client's own read timeout still bounds a call where
// the client caps the deadline by it (go-redis without
// ContextTimeoutEnabled, redigo's DoContext): a store's test gives its
// connections one that fits a busy machine too.
const loadTimeout = 2 * time.Minute

// underLoad makes call with a context bounded by loadTimeout, and records
// the slowest call.
func (c *checker) underLoad(call func(ctx context.Context) (limiter.Result, error)) (limiter.Result, error) {
	ctx, cancel := context.WithTimeout(c.ctx, loadTimeout)
	defer cancel()
	start := time.Now()
	r, err := call(ctx)
	took := int64(time.Since(start))
	for {
		cur := c.slowest.Load()
		if took <= cur || c.slowest.CompareAndSwap(cur, took) {
			return r, err
		}
	}
}

// unknownOutcomes returns how many of calls' errs left the outcome unknown
// (store.ErrUnknownOutcome: a reply lost or past a timeout), and fails the
// check for any other error, or when more than 1% of the calls are unknown:
// then the machine is too busy for the check to say much.
func (c *checker) unknownOutcomes(prop string, calls int, errs []error) int64 {
	c.t.Helper()
	var unknown []error
	var other []error
	for _, e := range errs {
		if errors.Is(e, store.ErrUnknownOutcome) {
			unknown = append(unknown, e)
		} else {
			other = append(other, e)
		}
	}
	if len(other) > 0 {
		c.t.Errorf("%s: %d of %d calls failed%s", prop, len(other), calls, firstErrs(other))
	}
	if len(unknown) > calls/100 {
		c.t.Errorf("%s: %d of %d calls timed out or lost their reply (outcome unknown): the machine or the server is too busy for the check%s", prop, len(unknown), calls, firstErrs(unknown))
	} else if len(unknown) > 0 {
		c.t.Logf("%s: %d of %d calls' outcome is unknown (counted apart)%s", prop, len(unknown), calls, firstErrs(unknown))
	}
	return int64(len(unknown))
}

// Property 2: weighted costs.
func checkWeightedCosts(c *checker) {
	const g, m, rate = 16, 40, 1000
	l := limiter.PerHour(rate)
	c.window(l)
	lim := c.limiter(nil)
	var sum, unknownCost atomic.Int64
	start := time.Now()
	a, _, errs := hammer(g, m, func(w, i int) (limiter.Result, error) {
		cost := int64(rand.New(rand.NewPCG(uint64(w), uint64(i))).IntN(40) + 1)
		r, err := c.underLoad(func(ctx context.Context) (limiter.Result, error) { return lim.AllowN(ctx, "p2", cost, l) })
		if err == nil && r.Allowed {
			sum.Add(cost)
		}
		if errors.Is(err, store.ErrUnknownOutcome) {
			unknownCost.Add(cost)
		}
		return r, err
	})
	rf := c.refill(l, start)
	c.unknownOutcomes("property 2", g*m, errs)
	if s := sum.Load(); s > rate+rf {
		c.t.Errorf("property 2: admitted cost %d in %d requests exceeds the limit %d (%d refilled while they ran)", s, a, rate, rf)
	}
	if !c.spec.DeniedConsume && c.spec.LeaseUnits == 0 {
		if n, s, u := c.counter("p2", l), sum.Load(), unknownCost.Load(); n < s-c.refill(l, start) || n > s+u {
			c.t.Errorf("property 2: server counter %d, admitted cost %d, cost of calls whose outcome is unknown %d: want the counter in [%d, %d]", n, s, u, s-c.refill(l, start), s+u)
		}
	}

	// A request larger than what remains is denied whole, and told what
	// remains.
	small := limiter.PerHour(10)
	for _, step := range []struct {
		cost      int64
		allowed   bool
		counter   int64
		remaining int64
	}{{7, true, 7, 3}, {5, false, 7, 3}, {4, false, 7, 3}, {3, true, 10, 0}, {1, false, 10, 0}} {
		r, err := lim.AllowN(c.ctx, "p2-whole", step.cost, small)
		if err != nil {
			c.t.Fatalf("property 2: AllowN(%d): %v", step.cost, err)
		}
		if r.Allowed != step.allowed {
			c.t.Errorf("property 2: AllowN(%d) allowed=%v, want %v", step.cost, r.Allowed, step.allowed)
		}
		// (a unit refills in 6 minutes: none while these run)
		if r.Remaining != step.remaining && !c.spec.DeniedConsume && c.spec.LeaseUnits == 0 {
			c.t.Errorf("property 2: AllowN(%d) Remaining %d, want %d", step.cost, r.Remaining, step.remaining)
		}
		if n := c.counter("p2-whole", small); n != step.counter && !c.spec.DeniedConsume && c.spec.LeaseUnits == 0 {
			c.t.Errorf("property 2: after AllowN(%d) the counter is %d, want %d (a denied request was partly consumed)", step.cost, n, step.counter)
		}
	}
}

// Property 3: hostile costs.
func checkHostileCosts(c *checker) {
	l := limiter.PerMinute(10)
	c.window(l)
	lim := c.limiter(nil)

	r, err := lim.AllowN(c.ctx, "p3", 0, l)
	if err != nil || !r.Allowed || r.Remaining != 10 {
		c.t.Errorf("property 3: cost 0 on a fresh key = %+v, %v; want allowed with 10 remaining", r, err)
	}
	if ks := c.keys(); len(ks) != 0 {
		c.t.Errorf("property 3: cost 0 created keys %q", ks)
	}
	if _, err := lim.AllowN(c.ctx, "p3", -1, l); !errors.Is(err, limiter.ErrInvalidCost) {
		c.t.Errorf("property 3: cost -1 returned %v, want ErrInvalidCost", err)
	}
	if ks := c.keys(); len(ks) != 0 {
		c.t.Errorf("property 3: a negative cost wrote keys %q", ks)
	}
	// A cost above the limit never fits, on a fresh subject (a full
	// bucket, an empty window) too, alone or beside another limit.
	other := limiter.Limit{Rate: 1000, Period: time.Hour, Name: "other"}
	for _, ls := range [][]limiter.Limit{{l}, {other, l}} {
		for _, cost := range []int64{11, math.MaxInt64} {
			r, err := lim.AllowN(c.ctx, "p3-fresh", cost, ls...)
			if err != nil || r.Allowed || r.RetryAfter != -1 {
				c.t.Errorf("property 3: cost %d above %s on a fresh subject = %+v, %v; want denied with RetryAfter -1", cost, l, r, err)
			}
		}
	}
	if ks := c.keys(); len(ks) != 0 && !c.spec.DeniedConsume {
		c.t.Errorf("property 3: a cost above the limit wrote keys %q", ks)
	}

	if r, err := lim.AllowN(c.ctx, "p3", 4, l); err != nil || !r.Allowed {
		c.t.Fatalf("property 3: AllowN(4) = %+v, %v", r, err)
	}
	// Time passes first (2 ms: the virtual clock starts on a whole second,
	// so no window of a minute ends in them), so that a cost-0 call that
	// gave the key its Period again would leave a longer TTL than it found.
	c.h.Advance(2 * time.Millisecond)
	before := c.ttls()
	if r, err := lim.AllowN(c.ctx, "p3", 0, l); err != nil || !r.Allowed || r.Remaining != 6 {
		c.t.Errorf("property 3: cost 0 on a used key = %+v, %v; want allowed with 6 remaining", r, err)
	}
	after := c.ttls()
	for k, b := range before {
		if a := after[k]; a > b || (c.h.Caps().VirtualClock && a != b) {
			c.t.Errorf("property 3: cost 0 moved the TTL of %q from %dms to %dms", k, b, a)
		}
	}

	for _, cost := range []int64{11, 1 << 53, math.MaxInt64} {
		r, err := lim.AllowN(c.ctx, "p3", cost, l)
		if err != nil {
			c.t.Errorf("property 3: cost %d returned error %v, want a clean denial", cost, err)
			continue
		}
		if r.Allowed || r.RetryAfter != -1 {
			c.t.Errorf("property 3: cost %d above the limit = allowed %v, RetryAfter %s; want denied with RetryAfter -1", cost, r.Allowed, r.RetryAfter)
		}
		if n := c.counter("p3", l); n != 4 {
			c.t.Errorf("property 3: cost %d changed the counter to %d, want 4", cost, n)
		}
	}
	if r, err := lim.AllowN(c.ctx, "p3", 6, l); err != nil || !r.Allowed || r.Remaining != 0 {
		c.t.Errorf("property 3: a cost equal to what remains = %+v, %v; want allowed with 0 remaining", r, err)
	}
}

// ttls returns the PTTL of every key under the prefix.
func (c *checker) ttls() map[string]int64 {
	out := map[string]int64{}
	for _, k := range c.keys() {
		out[k] = c.pttl(k)
	}
	return out
}

// Property 4: several limits are one all-or-nothing decision.
func checkMultiRule(c *checker) {
	ten := limiter.Limit{Rate: 10, Period: time.Minute, Name: "ten"}
	five := limiter.Limit{Rate: 5, Period: time.Minute, Name: "five"}
	c.window(ten)
	lim := c.limiter(nil)

	// (a unit of five refills in 12 s: none while these run)
	exact := !c.spec.DeniedConsume && c.spec.LeaseUnits == 0
	admitted := 0
	for i := 0; i < 12; i++ {
		r, err := lim.Allow(c.ctx, "p4-seq", ten, five)
		if err != nil {
			c.t.Fatalf("property 4: Allow: %v", err)
		}
		if r.Allowed {
			admitted++
		} else if r.Limit.Name != "five" || r.Index != 1 {
			c.t.Errorf("property 4: denial bound by %s (index %d), want five (index 1)", r.Limit, r.Index)
		}
		if want := int64(5 - admitted); exact && r.Remaining != want {
			c.t.Errorf("property 4: call %d of %s and %s: Remaining %d, want %d (the least any limit has left)", i+1, ten, five, r.Remaining, want)
		}
	}
	if admitted != 5 {
		c.t.Errorf("property 4: sequential: admitted %d, want 5", admitted)
	}
	c.assertCounters("p4-seq", 5, ten, five)
	// A Peek decides on every limit, in either order: five is used up.
	for _, order := range [][]limiter.Limit{{ten, five}, {five, ten}} {
		r, err := lim.Peek(c.ctx, "p4-seq", order...)
		at := slices.Index(order, five)
		if err != nil || r.Allowed || r.Index != at || r.Limit.Name != "five" || r.RetryAfter <= 0 {
			c.t.Errorf("property 4: Peek of %s and %s with five used up = %+v, %v; want denied by five (index %d), RetryAfter > 0", order[0], order[1], r, err, at)
		}
	}
	// A denial by a later limit waits for that limit, not the first.
	fast := limiter.Limit{Rate: 10, Period: time.Second, Name: "fast"}
	slow := limiter.Limit{Rate: 1, Period: time.Minute, Name: "slow"}
	// (an epoch-aligned window of slow may be about to end: its
	// RetryAfter is then as short)
	beyond := c.spec.life(fast.Period) + time.Millisecond
	if c.spec.Aligned {
		ms := c.serverTime().UnixMilli()
		if left := slow.Period - time.Duration(ms%slow.Period.Milliseconds())*time.Millisecond; left < beyond+time.Second {
			beyond = 0
		}
	}
	if r, err := lim.Allow(c.ctx, "p4-retry", fast, slow); err != nil || !r.Allowed {
		c.t.Errorf("property 4: first call of %s and %s = %+v, %v; want admitted", fast, slow, r, err)
	} else if r, err := lim.Allow(c.ctx, "p4-retry", fast, slow); err != nil || r.Allowed || r.Index != 1 || r.RetryAfter <= beyond {
		c.t.Errorf("property 4: second call of %s and %s = %+v, %v; want denied by slow (index 1), RetryAfter beyond %s (fast's window)", fast, slow, r, err, beyond)
	}

	start := time.Now()
	a, _, errs := hammer(32, 4, func(int, int) (limiter.Result, error) {
		return c.underLoad(func(ctx context.Context) (limiter.Result, error) { return lim.Allow(ctx, "p4-conc", ten, five) })
	})
	unknown := c.unknownOutcomes("property 4", 32*4, errs)
	rf := c.refill(five, start)
	if a > 5+rf || (c.spec.Exact && a+unknown < 5) {
		c.t.Errorf("property 4: concurrent: admitted %d (and %d calls whose outcome is unknown), want 5 (%d refilled while they ran)", a, unknown, rf)
	}
	if rf > 0 || c.refill(ten, start) > 0 {
		// Slower than a unit's refill: the counters no longer say what
		// was admitted.
		return
	}
	if unknown == 0 {
		c.assertCounters("p4-conc", a, ten, five)
	} else if !c.spec.DeniedConsume {
		// Some calls may or may not have counted: both counters lie between
		// the admitted and the admitted + unknown, and agree.
		n10, n5 := c.counter("p4-conc", ten), c.counter("p4-conc", five)
		if n10 != n5 || n5 < a || n5 > a+unknown {
			c.t.Errorf("property 4: concurrent: counters %d and %d, %d admitted and %d unknown: want equal counters in [%d, %d]", n10, n5, a, unknown, a, a+unknown)
		}
	}
}

func (c *checker) assertCounters(subject string, want int64, ls ...limiter.Limit) {
	c.t.Helper()
	if c.spec.DeniedConsume {
		return
	}
	for _, l := range ls {
		if n := c.counter(subject, l); n != want {
			c.t.Errorf("%s: counter of %s reads %d, want %d (a rejected request consumed quota)", subject, l, n, want)
		}
	}
}

// Property 6: a key that expires between a strategy's read and its write
// must not come back without a TTL.
func checkForcedLeak(c *checker) {
	l := limiter.Per(100, 100*time.Millisecond)
	c.window(l)
	hs := newHookStore(c.h.Store())
	lim := c.limiter(hs.store())
	stale := 0
	for i := 0; i < 4; i++ {
		hs.arm(func() { c.h.Advance(l.Period + time.Millisecond) })
		r, err := lim.Allow(c.ctx, "p6", l)
		switch {
		case err != nil:
			c.t.Errorf("property 6: call %d: %v", i, err)
		case !r.Allowed && !c.h.Caps().VirtualClock && errors.Is(r.Cause, strategy.ErrStaleWindow):
			// On a real clock the hook sleeps a whole window, and when it
			// falls between two of a decision's tries (the first sent for
			// a window the server had not begun), the next ones may meet
			// windows' ends on a busy machine: a strategy that will not
			// count in a window that is over denies, saying so. No lack of
			// quota, and the keys are still checked below.
			stale++
			c.t.Logf("property 6: call %d: %v", i, r.Cause)
		case !r.Allowed:
			c.t.Errorf("property 6: call %d denied in a window that had just expired: %+v", i, r)
		}
		for k, p := range c.ttls() {
			if p == -1 {
				c.t.Errorf("property 6: call %d left %q without a TTL (the key expired between read and write)", i, k)
			}
		}
	}
	if stale == 4 {
		c.t.Errorf("property 6: all 4 calls denied as too slow for their windows of %s: the machine is too busy to run the check", l.Period)
	}
}

// hookStore runs a hook once, after the first round trip of the next
// decision: between a multi-round-trip strategy's read and its write. On a
// store with a Watcher, it also fires after the first read on a pinned
// connection (Tx.Do), before the EXEC. Use it through store().
type hookStore struct {
	store.Store
	hook atomic.Pointer[func()]
	// every, when set, runs after every round trip. A call whose
	// context ended may still be in its round trip when the check that
	// set it ends and clears it (an adapter bounds the wait, not the
	// call), so it is read and written atomically.
	every atomic.Pointer[func()]
}

// setEvery sets the function run after every round trip; nil clears it.
func (h *hookStore) setEvery(f func()) {
	if f == nil {
		h.every.Store(nil)
		return
	}
	h.every.Store(&f)
}

func newHookStore(st store.Store) *hookStore { return &hookStore{Store: st} }

// store returns h as a store.Store, with a Watcher and a
// store.Int64sEvaler when the wrapped store has them (so that a strategy
// takes the path it takes in production).
func (h *hookStore) store() store.Store {
	w, isW := h.Store.(store.Watcher)
	ev, isEv := h.Store.(store.Int64sEvaler)
	switch {
	case isW && isEv:
		return hookWatcherInts{hookWatcher{h, w}, hookInts{h, ev}}
	case isW:
		return hookWatcher{h, w}
	case isEv:
		return hookEvaler{h, hookInts{h, ev}}
	}
	return h
}

// hookInts fires the hook after an integer script's round trip.
type hookInts struct {
	h  *hookStore
	ev store.Int64sEvaler
}

func (h hookInts) EvalShaInt64s(ctx context.Context, sha string, keys []string, args []int64, dst []int64) ([]int64, error) {
	defer h.h.fire()
	return h.ev.EvalShaInt64s(ctx, sha, keys, args, dst)
}

func (h hookInts) EvalInt64s(ctx context.Context, src string, keys []string, args []int64, dst []int64) ([]int64, error) {
	defer h.h.fire()
	return h.ev.EvalInt64s(ctx, src, keys, args, dst)
}

// hookEvaler is a hookStore whose store has a store.Int64sEvaler.
type hookEvaler struct {
	*hookStore
	hookInts
}

// hookWatcherInts is a hookStore whose store has both.
type hookWatcherInts struct {
	hookWatcher
	hookInts
}

// hookWatcher is a hookStore whose store has a Watcher.
type hookWatcher struct {
	*hookStore
	w store.Watcher
}

func (h hookWatcher) Watch(ctx context.Context, keys []string, fn func(store.Tx) error) error {
	return h.w.Watch(ctx, keys, func(tx store.Tx) error { return fn(hookTx{tx, h.hookStore}) })
}

// hookTx fires the hook after a read on the pinned connection.
type hookTx struct {
	store.Tx
	h *hookStore
}

func (t hookTx) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	defer t.h.fire()
	return t.Tx.Do(ctx, cmds...)
}

// arm sets the hook to run after the next round trip; nil disarms it.
func (h *hookStore) arm(f func()) {
	if f == nil {
		h.hook.Store(nil)
		return
	}
	h.hook.Store(&f)
}

func (h *hookStore) fire() {
	if f := h.every.Load(); f != nil {
		(*f)()
	}
	if f := h.hook.Swap(nil); f != nil {
		(*f)()
	}
}

func (h *hookStore) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	defer h.fire()
	return h.Store.Do(ctx, cmds...)
}

func (h *hookStore) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	defer h.fire()
	return h.Store.EvalSha(ctx, sha, keys, args)
}

func (h *hookStore) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	defer h.fire()
	return h.Store.Eval(ctx, src, keys, args)
}

// Property 9: the window never slides.
func checkNeverSlides(c *checker) {
	if c.spec.Weighted && !c.spec.Window {
		checkWeightedNeverSlides(c)
		return
	}
	if !c.spec.Window {
		c.t.Skip("the strategy declares no fixed window")
	}
	c.timedRuns("tick", func(l limiter.Limit, run int, scale time.Duration) ([]string, string) {
		return c.neverSlidesRun(l, fmt.Sprintf("p9-%d", run), scale)
	})
}

// timedRuns runs property 9 at 10 per second: on a real clock the calls
// must come on time, and a run with a late one (a busy machine) proves
// nothing either way, so it is run again, on a fresh subject, with every
// time in it twice as long (windows of 2 s, then 4 s), so that a call has
// twice the time. Three late runs fail as too busy; else the problems of
// the run that came on time are the check's.
func (c *checker) timedRuns(what string, one func(l limiter.Limit, run int, scale time.Duration) (problems []string, late string)) {
	const runs = 3
	for run := 1; ; run++ {
		scale := time.Duration(1) << (run - 1)
		l := limiter.Per(10, scale*time.Second)
		c.window(l)
		problems, late := one(l, run, scale)
		if late == "" {
			for _, p := range problems {
				c.t.Error(p)
			}
			return
		}
		if run == runs {
			c.t.Errorf("property 9: %d runs had a late %s (the last: %s); the machine is too busy to time the check", runs, what, late)
			return
		}
		c.t.Logf("property 9: run %d void, %s; running again", run, late)
	}
}

// checkWeightedNeverSlides is property 9 for a sliding window counter:
// its windows follow each other every Period from an idle limit's first
// request, whatever the requests in between. At 10 per Period, 5 units at
// 0 and 5 at 0.9·Period fill the first window; at 1.6·Period the first
// window's 10 weigh 4, so 5 more fit (on a virtual clock exactly 6: 5,
// then 1 left). A window restarted by the admission at 0.9·Period (an
// expiry moved on every call) still counts 10 there and admits nothing; a
// previous window that does not weigh admits 10. On a real clock a run
// whose calls came too late to prove either is void and runs again with
// every time doubled.
func checkWeightedNeverSlides(c *checker) {
	virtual := c.h.Caps().VirtualClock
	c.timedRuns("call", func(l limiter.Limit, run int, _ time.Duration) ([]string, string) {
		problem, late := c.weightedRun(l, fmt.Sprintf("p9w-%d", run), virtual)
		if problem == "" {
			return nil, late
		}
		return []string{problem}, late
	})
}

// weightedRun is one run of checkWeightedNeverSlides on subject. It
// returns what it found wrong, or, on a real clock, why the run is void.
func (c *checker) weightedRun(l limiter.Limit, subject string, virtual bool) (problem, late string) {
	lim := c.limiter(nil)
	P := l.Period
	start := time.Now()
	var clock time.Duration // virtual: the time since start
	at := func(t time.Duration) {
		if virtual {
			c.h.Advance(t - clock)
			clock = t
			return
		}
		time.Sleep(time.Until(start.Add(t)))
	}
	call := func(when string, n int64) limiter.Result {
		r, err := lim.AllowN(c.ctx, subject, n, l)
		if err != nil {
			c.t.Fatalf("property 9: %s: AllowN(%d): %v", when, n, err)
		}
		return r
	}
	// The first window starts while the first call runs, in [0, first].
	if r := call("at 0", 5); !r.Allowed {
		return fmt.Sprintf("property 9: the first 5 of 10 per %s on a fresh limit: %+v; want admitted", P, r), ""
	}
	first := time.Since(start)
	at(P * 9 / 10)
	if r := call("at 0.9 Period", 5); !r.Allowed {
		return fmt.Sprintf("property 9: 5 more of 10 per %s at 0.9·Period, in the first window: %+v; want admitted", P, r), ""
	}
	if !virtual {
		if d := time.Since(start); d >= P-first {
			return "", fmt.Sprintf("the call due at 0.9·Period ended at %s, maybe in the next window", d.Round(time.Millisecond))
		}
	}
	at(P * 16 / 10)
	began := time.Since(start)
	r := call("at 1.6 Period", 5)
	if !virtual {
		// e, the time into the second window, must be at least P/2 (the
		// first window's 10 then weigh at most 5) and below P
		if d := time.Since(start); began-first < P*3/2 || d >= 2*P {
			return "", fmt.Sprintf("the call due at 1.6·Period ran in [%s, %s] since the start, the first window's start in [0, %s]", began.Round(time.Millisecond), d.Round(time.Millisecond), first.Round(time.Millisecond))
		}
	}
	if !r.Allowed {
		return fmt.Sprintf("property 9: 10 per %s, 5 admitted at 0 and 5 at 0.9·Period: at 1.6·Period 5 more = %+v; want admitted (the first window's 10 weigh 4 there): did the admission at 0.9·Period start a new window (its expiry moved)?", P, r), ""
	}
	if !virtual {
		return "", ""
	}
	if r.Remaining != 1 {
		return fmt.Sprintf("property 9: 10 per %s, 5 admitted at 0, 0.9·Period and 1.6·Period: Remaining %d, want 1 (5 counted, the first window's 10 weighing 4)", P, r.Remaining), ""
	}
	if r := call("at 1.6 Period, one over", 2); r.Allowed {
		return fmt.Sprintf("property 9: 10 per %s, 5 admitted at 0, 0.9·Period and 1.6·Period: 2 more admitted (%+v), one fits", P, r), ""
	}
	return "", ""
}

// neverSlidesRun is one run of property 9 on subject: 5 calls every 200ms
// (or 300ms) at 10/s across three windows, every time multiplied by scale
// (l's Period is scale seconds). It returns what it found wrong, or, on a
// real clock, why the run is void when a tick came late.
func (c *checker) neverSlidesRun(l limiter.Limit, subject string, scale time.Duration) (problems []string, late string) {
	lim := c.limiter(nil)
	virtual := c.h.Caps().VirtualClock
	if c.spec.Aligned {
		// Epoch-aligned windows: start 100ms into one, so that the ticks
		// (every 200ms) stay 100ms away from every window's edges.
		c.alignTo(l.Period, scale*100*time.Millisecond)
	}
	// Ticks every 200ms, 15 of them, touch three windows of 1s. On a real
	// server a first-request window starts at a tick and would end exactly
	// on a later one, racing the expiry: there the ticks are 300ms apart
	// (10 of them), so every window end is at least 100ms from a tick.
	interval, ticks := scale*200*time.Millisecond, 15
	if !virtual && !c.spec.Aligned {
		interval, ticks = scale*300*time.Millisecond, 10
	}
	// A tick's work must end within budget of its time to stay in its
	// window; on a virtual clock time stands still meanwhile.
	budget := scale * 90 * time.Millisecond
	start := time.Now()
	var clock time.Duration // virtual: the time since start
	elapsed := func() time.Duration {
		if virtual {
			return clock
		}
		return time.Since(start)
	}
	period := l.Period.Milliseconds()
	// The current window's expiry, since start, lies in [lo, hi]: its PTTL
	// was read at some instant of a sweep and is rounded down to the ms.
	var expLo, expHi time.Duration
	var slack time.Duration
	if !virtual {
		slack = time.Millisecond
	}
	window := int64(-1) // Aligned: the epoch window expLo belongs to
	// On a real server the current window's expiry is also read as the
	// server keeps it, an absolute time (PEXPIRETIME; before Redis 7.0, an
	// interval of a millisecond or two from the server's TIME and PTTL in
	// one script): within a window it must not change, whatever the
	// server's wall clock does against this process's (an NTP step or
	// slew on the server's host moves PTTL, not the expiry). [atLo, atHi]
	// is the window's expiry, atLo 0 while unknown; abs false once the
	// server has refused both ways.
	var atLo, atHi int64
	abs := !virtual
	admitted := 0
	// Aligned: the calls and admissions of each server window. On a real
	// clock the ticks may all come some milliseconds late (the sleep to
	// the first one, a busy machine), still within their budget, so that
	// the last one falls in a fourth window: each window must admit what
	// its calls ask up to the Rate, whatever the number of windows.
	type count struct{ calls, admitted int }
	var windows []int64
	perWindow := map[int64]count{}
	for tick := 0; tick < ticks; tick++ {
		due := time.Duration(tick) * interval
		var before int64
		if c.spec.Aligned {
			before = c.serverTime().UnixMilli() / period
		}
		began := elapsed()
		tickAdmitted := 0
		for j := 0; j < 5; j++ {
			r, err := lim.Allow(c.ctx, subject, l)
			if err != nil {
				c.t.Fatalf("property 9: %v", err)
			}
			if r.Allowed {
				tickAdmitted++
			}
		}
		admitted += tickAdmitted
		// The current window's key is the one that lives longest (an
		// epoch-aligned strategy keeps the last window's key for a grace).
		var p time.Duration
		found := false
		var longest string
		lo := elapsed()
		var early []string // counts in a window after the server's
		for k, ms := range c.ttls() {
			if !strings.Contains(k, "{"+subject+"}") {
				continue
			}
			if c.laterWindow(k, subject, l, before) {
				if !c.emptyCounter(k, l) {
					early = append(early, fmt.Sprintf("property 9: tick %d: key %q of a window after the server's (%d) holds a count: counted in a window that has not begun", tick, k, before))
				}
				continue
			}
			if d := time.Duration(ms) * time.Millisecond; !found || d > p {
				p, longest = d, k
			}
			found = true
		}
		hi := elapsed()
		var same bool
		if c.spec.Aligned {
			// A tick whose calls met a window's end proves nothing (its
			// last calls count in the next window, which has begun): the
			// run is void, whatever its keys say.
			w := c.serverTime().UnixMilli() / period
			if w != before {
				return nil, fmt.Sprintf("tick %d straddled a window's end (server window %d, then %d)", tick, before, w)
			}
			same = w == window
			window = w
			n, ok := perWindow[w]
			if !ok {
				windows = append(windows, w)
			}
			perWindow[w] = count{n.calls + 5, n.admitted + tickAdmitted}
		}
		problems = append(problems, early...)
		if !found {
			if took := elapsed() - due; !virtual && took > budget {
				// a late tick's window may have ended before its keys
				// were read
				return nil, fmt.Sprintf("tick %d ended %s after its time, its window's key gone", tick, took.Round(time.Millisecond))
			}
			return append(problems, fmt.Sprintf("property 9: tick %d: no key after 5 calls", tick)), ""
		}
		if !c.spec.Aligned {
			switch {
			case expLo > lo: // the window's key outlived this tick's calls
				same = true
			case !virtual && expHi != 0 && expHi >= began:
				return nil, fmt.Sprintf("tick %d may have met its window's end (expiry in [%s, %s], calls in [%s, %s])", tick, expLo, expHi, began, lo)
			}
		}
		newLo, newHi := lo+p, hi+p+slack
		var nowLo, nowHi int64
		if abs {
			nowLo, nowHi, abs = c.expireTime(longest)
		}
		switch {
		case same && abs && atLo != 0:
			if nowLo > atHi || nowHi < atLo {
				problems = append(problems, fmt.Sprintf("property 9: tick %d: the window's expiry moved within the window, from %s to %s by the server's clock (EXPIRE on every call?)", tick, stamps(atLo, atHi), stamps(nowLo, nowHi)))
			}
		case same && !abs:
			if newLo > expHi || newHi < expLo {
				problems = append(problems, fmt.Sprintf("property 9: tick %d: the window's expiry moved within the window, from [%s, %s] to [%s, %s] since the start (EXPIRE on every call?)", tick, expLo, expHi, newLo, newHi))
			}
		}
		if !same {
			expLo, expHi, atLo, atHi = newLo, newHi, nowLo, nowHi
		}
		if !virtual {
			if took := elapsed() - due; took > budget {
				return nil, fmt.Sprintf("tick %d ended %s after its time", tick, took.Round(time.Millisecond))
			}
		}
		switch {
		case virtual:
			c.h.Advance(interval)
			clock += interval
		default:
			// No drift: aligned ticks stay 100ms from the windows' edges,
			// first-request ticks 100ms from their windows' ends.
			time.Sleep(time.Until(start.Add(time.Duration(tick+1) * interval)))
		}
	}
	if c.spec.Aligned {
		for _, w := range windows {
			n := perWindow[w]
			if want := min(n.calls, int(l.Rate)); n.admitted != want {
				problems = append(problems, fmt.Sprintf("property 9: 5 calls every %s at 10 per %s: server window %d (of %d windows) admitted %d of its %d calls, want %d", interval, l.Period, w, len(windows), n.admitted, n.calls, want))
			}
		}
		return problems, ""
	}
	if admitted != 30 {
		problems = append(problems, fmt.Sprintf("property 9: 5 calls every %s for %s at 10 per %s admitted %d, want 30 (10 in each of 3 windows)", interval, time.Duration(ticks-1)*interval, l.Period, admitted))
	}
	return problems, ""
}

// stamps formats the Unix milliseconds lo, or the interval [lo, hi].
func stamps(lo, hi int64) string {
	f := func(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.StampMilli) }
	if lo == hi {
		return f(lo)
	}
	return "[" + f(lo) + ", " + f(hi) + "]"
}

// Property 10: sub-second and long windows.
func checkWindowLengths(c *checker) {
	lim := c.limiter(nil)
	virtual := c.h.Caps().VirtualClock
	for _, w := range []time.Duration{50 * time.Millisecond, 999 * time.Millisecond, 1001 * time.Millisecond, 24 * time.Hour, limiter.MaxPeriod} {
		l := limiter.Per(2, w)
		c.window(l)
		subject := fmt.Sprintf("p10-%d", w.Milliseconds())
		// The key lives until its window ends (plus the slack): a Period
		// from now, or, for epoch-aligned windows, until the next multiple
		// of the Period.
		// at is read before the server's clock: the time the reply of
		// TIME takes back to us (long on a loaded machine) must count as
		// elapsed, not as window left.
		at := time.Now()
		left, slack := w, c.spec.TTLSlack
		cur := int64(-1) // Aligned: the server's window
		switch {
		case c.spec.Aligned:
			ms := c.serverTime().UnixMilli()
			left = w - time.Duration(ms%w.Milliseconds())*time.Millisecond
			if virtual && left < 10*time.Millisecond {
				// c.window waits out a window's end only on a real
				// clock: step over this one, whose last milliseconds
				// a strategy that picks its bucket by the app's clock
				// may stamp with the next one
				c.h.Advance(left)
				left, ms = w, ms+left.Milliseconds()
			}
			cur = ms / w.Milliseconds()
		case c.spec.KeyPeriods > 1:
			left = time.Duration(c.spec.KeyPeriods) * w
		case c.spec.Refills:
			// until the limit is full again: one unit's Period/Rate, in
			// whole milliseconds (1 ms of rounding allowed)
			left, slack = refillTime(l, 1), slack+time.Millisecond
		}
		r, err := lim.Allow(c.ctx, subject, l)
		if err != nil || !r.Allowed {
			c.t.Errorf("property 10: window %s: first call = %+v, %v", w, r, err)
			continue
		}
		if r.ResetAfter <= 0 || r.ResetAfter > c.spec.life(w) {
			c.t.Errorf("property 10: window %s: ResetAfter %s out of (0, %s]", w, r.ResetAfter, c.spec.life(w))
		}
		found := 0
		for k, p := range c.ttls() {
			if !strings.Contains(k, "{"+subject+"}") {
				continue
			}
			if c.earlierWindow(k, subject, l, cur) && c.emptyCounter(k, l) {
				// a decision stamped with the window that had just
				// ended, then counted in the server's: its count was
				// taken back and the key admits nothing
				continue
			}
			if c.laterWindow(k, subject, l, cur) {
				if c.emptyCounter(k, l) {
					continue // taken back: it admits nothing
				}
				if virtual {
					c.t.Errorf("property 10: window %s: key %q of a window after the server's (%d) holds a count: counted in a window that has not begun", w, k, cur)
					continue
				}
				// on a real clock the call may have met the window's
				// end: the later window is the current one
			}
			found++
			// On a real server the PTTL is read some time after the call
			// (a Cluster's keys are scanned on every master): the TTL has
			// run down by that much, and a short window may have ended.
			elapsed := time.Since(at)
			if p == -2 && !virtual && elapsed >= left {
				continue // expired on time between the scan and its PTTL
			}
			ttl := time.Duration(p) * time.Millisecond
			low, high := left-elapsed-5*time.Millisecond, left+slack
			if virtual {
				low = left
			} else if c.spec.Aligned {
				// a call slower than what was left of the window counts
				// in a later one, which may have up to a Period left
				high = w + slack
			}
			if ttl > high || ttl < low {
				c.t.Errorf("property 10: window %s: key %q has PTTL %s, want in [%s, %s]", w, k, ttl, low, high)
			}
		}
		if found == 0 && (virtual || time.Since(at) < left) {
			c.t.Errorf("property 10: window %s: no key after an admitted request, %s before its window's end (a zero-second EXPIRE deleted it?)", w, left-time.Since(at))
		}
		if !virtual && w < time.Second {
			continue // the window may end between the calls below
		}
		r2, err2 := lim.Allow(c.ctx, subject, l)
		r3, err3 := lim.Allow(c.ctx, subject, l)
		if err2 == nil && err3 == nil && r2.Allowed && r3.Allowed && !virtual && time.Since(at) >= min(left, w) {
			// A slow machine: the window may have ended (or a unit
			// come back) before call 3, which then rightly admits;
			// left was read off the server's clock after at, so the
			// window surely had not ended while less had passed.
			c.t.Logf("property 10: window %s: calls 2 and 3 both admitted, but %s had passed of the %s left: not checked", w, time.Since(at).Round(time.Millisecond), min(left, w))
		} else if err2 != nil || err3 != nil || !r2.Allowed || r3.Allowed {
			c.t.Errorf("property 10: window %s, limit 2: calls 2 and 3 = (%v, %v), (%v, %v); want allowed then denied", w, r2.Allowed, err2, r3.Allowed, err3)
		} else if r3.RetryAfter <= 0 || r3.RetryAfter > c.spec.life(w) {
			c.t.Errorf("property 10: window %s: RetryAfter %s out of (0, %s]", w, r3.RetryAfter, c.spec.life(w))
		}
	}
	checkMixedWindows(c, lim)
	if virtual && c.spec.LeaseUnits == 0 && !c.spec.DeniedConsume {
		checkResetAfterExact(c, lim)
	}
}

// checkResetAfterExact is property 10's half on ResetAfter, on a virtual
// clock: it is the time until the limit is full again, exactly (to the
// millisecond it is reported in): a millisecond before it the limit is
// not full, at it the limit is.
func checkResetAfterExact(c *checker, lim *limiter.Limiter) {
	l := limiter.Per(2, time.Minute)
	c.window(l)
	advance := c.h.Advance
	if c.spec.Clocked != nil {
		// A strategy that counts time on the app's clock between its
		// readings of the server's (AlignedWindow: a call that reads no
		// clock) is given one that moves with the server's.
		var shift atomic.Int64
		lim = c.limiterOf(nil, c.spec.Clocked(func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }))
		advance = func(d time.Duration) { shift.Add(int64(d)); c.h.Advance(d) }
	}
	const subject = "p10-reset"
	start := time.Now()
	if r, err := lim.Allow(c.ctx, subject, l); err != nil || !r.Allowed {
		c.t.Errorf("property 10: ResetAfter: first call = %+v, %v; want admitted", r, err)
		return
	}
	advance(15 * time.Second)
	r, err := lim.Allow(c.ctx, subject, l)
	if err != nil || !r.Allowed {
		c.t.Errorf("property 10: ResetAfter: second call, 15 s later = %+v, %v; want admitted", r, err)
		return
	}
	if r.ResetAfter <= time.Millisecond || r.ResetAfter > c.spec.life(l.Period) {
		c.t.Errorf("property 10: ResetAfter: second call's ResetAfter %s out of (1ms, %s]", r.ResetAfter, c.spec.life(l.Period))
		return
	}
	// An epoch-aligned window's call names its window from the server's
	// clock as last observed, moved on by the app clock and half a round
	// trip (a real server's clock moves while the call flies); the
	// virtual one here does not move with them, so a call made within
	// that much of the window's end (on a busy machine, more than a
	// millisecond) is named for the next window, refused as sent for the
	// wrong one, and denied with strategy.ErrStaleWindow once its resends
	// are named the same way. The probe before the end is earlier by the
	// real time the check has taken (longer than any of its round trips)
	// and 6 ms.
	early := time.Millisecond
	if c.spec.Aligned {
		early += 6*time.Millisecond + time.Since(start)
	}
	if early >= r.ResetAfter {
		c.t.Errorf("property 10: ResetAfter: %s passed on the real clock since the first call, more than the ResetAfter of %s: the machine is too busy to run the check", time.Since(start).Round(time.Millisecond), r.ResetAfter)
		return
	}
	advance(r.ResetAfter - early)
	if p, err := lim.Peek(c.ctx, subject, l); err != nil || p.Remaining >= l.Rate {
		c.t.Errorf("property 10: ResetAfter %s, %s before it: Peek = %+v, %v; want the limit not yet full (it was full earlier than ResetAfter said)", r.ResetAfter, early.Round(time.Millisecond), p, err)
	}
	// An epoch-aligned window's call that reads no clock counts the time
	// left from the latest time the server's clock may show at its app
	// clock's reading: since the strategy's last reading of the server's,
	// the app clock (which moves with the real one as well as with the
	// virtual one here) plus 1/10 000 of it (a minute at most here).
	// ResetAfter may be that much short.
	late := time.Millisecond
	if c.spec.Aligned {
		late += 6*time.Millisecond + time.Since(start)
	}
	advance(early - time.Millisecond + late)
	if p, err := lim.Peek(c.ctx, subject, l); err != nil || !p.Allowed || p.Remaining != l.Rate {
		c.t.Errorf("property 10: ResetAfter %s, %s after it: Peek = %+v, %v; want the limit full (%d remaining)", r.ResetAfter, (late - time.Millisecond).Round(time.Millisecond), p, err, l.Rate)
	}
}

// checkMixedWindows is property 10's half on a short and a long limit in
// one call: each limit's key lives by its own period (a strategy that gave
// every key the call's longest period would hold the short limit for an
// hour), and the short limit admits again once its own window is over.
func checkMixedWindows(c *checker, lim *limiter.Limiter) {
	short := limiter.Limit{Rate: 1, Period: 200 * time.Millisecond, Name: "short"}
	long := limiter.Limit{Rate: 100, Period: time.Hour, Name: "long"}
	c.window(short, long)
	const subject = "p10-mixed"
	if r, err := lim.Allow(c.ctx, subject, short, long); err != nil || !r.Allowed {
		c.t.Errorf("property 10: %s and %s: first call = %+v, %v; want admitted", short, long, r, err)
		return
	}
	// (1 ms for a refilling strategy's rounding of µs to ms)
	high := c.spec.life(short.Period) + 2*time.Millisecond
	for k, p := range c.ttls() {
		if strings.Contains(k, "{"+subject+"}") && strings.Contains(k, ":n=short") && time.Duration(p)*time.Millisecond > high {
			c.t.Errorf("property 10: %s and %s in one call: the short limit's key %q has PTTL %d ms, above its own window's %s", short, long, k, p, high)
		}
	}
	wait := c.spec.life(short.Period) + 5*time.Millisecond
	c.h.Advance(wait)
	if r, err := lim.Allow(c.ctx, subject, short, long); err != nil || !r.Allowed {
		c.t.Errorf("property 10: %s and %s in one call: %s after the first, the call = %+v, %v; want admitted (the short limit's window is over)", short, long, wait, r, err)
	}
}

// Property 11: a key stripped of its TTL gets one back.
func checkSelfRepair(c *checker) {
	l := limiter.PerMinute(3)
	c.window(l)
	lim := c.limiter(nil)
	// only names the subject whose keys persist and check take ("" for
	// every key)
	only := ""
	persist := func() {
		for _, k := range c.keys() {
			if !strings.Contains(k, "{"+only) {
				continue
			}
			if _, err := c.do(store.Cmd{Name: "PERSIST", Args: []any{k}}); err != nil {
				c.t.Fatalf("PERSIST: %v", err)
			}
		}
	}
	check := func(when string) {
		ks := c.ttls()
		if len(ks) == 0 {
			c.t.Errorf("property 11: %s: no keys", when)
		}
		for k, p := range ks {
			if !strings.Contains(k, "{"+only) {
				continue
			}
			if p <= 0 || time.Duration(p)*time.Millisecond > c.spec.life(l.Period) {
				c.t.Errorf("property 11: %s: %q has PTTL %d, want in (0, %s]", when, k, p, l.Period)
			}
		}
	}
	if _, err := lim.Allow(c.ctx, "p11", l); err != nil {
		c.t.Fatalf("property 11: %v", err)
	}
	persist()
	if r, err := lim.Allow(c.ctx, "p11", l); err != nil || !r.Allowed {
		c.t.Fatalf("property 11: allowed call after PERSIST = %+v, %v", r, err)
	}
	if !c.spec.RepairsAtDenial {
		check("after an admitted call")
	}
	if _, err := lim.Allow(c.ctx, "p11", l); err != nil {
		c.t.Fatalf("property 11: %v", err)
	}
	persist()
	if r, err := lim.Allow(c.ctx, "p11", l); err != nil || r.Allowed {
		c.t.Fatalf("property 11: fourth call of 3/min = %+v, %v; want denied", r, err)
	}
	check("after a denied call")
	// Every limit's key is repaired, not only the first's.
	a := limiter.Limit{Rate: 3, Period: time.Minute, Name: "a"}
	b := limiter.Limit{Rate: 2, Period: time.Minute, Name: "b"}
	only = "p11-two}"
	for i := range 3 { // admitted, admitted, denied by b
		r, err := lim.Allow(c.ctx, "p11-two", a, b)
		if err != nil || r.Allowed != (i < 2) {
			c.t.Fatalf("property 11: call %d of %s and %s = %+v, %v; want allowed=%v", i+1, a, b, r, err, i < 2)
		}
		if i == 1 {
			persist()
		}
	}
	check("after a denied call of two limits whose keys were stripped")
	only = "p11}"
	if !c.spec.Window || !c.h.Caps().VirtualClock {
		return
	}
	// A stripped key never holds its subject past its window: one Period
	// on, the subject has its whole limit again.
	c.h.Advance(l.Period)
	if r, err := lim.Allow(c.ctx, "p11", l); err != nil || !r.Allowed || r.Remaining != l.Rate-1 {
		c.t.Errorf("property 11: one Period after the repair: %+v, %v; want admitted with %d remaining", r, err, l.Rate-1)
	}
	if !c.spec.RepairsAtDenial {
		return
	}
	// Keys named by their window: a key stripped after an admission and
	// never denied in its window stays without a TTL (the documented cost
	// of repairing at denials), but never counts past its window for an
	// app clock that follows the server's (this one moves with Advance).
	if c.spec.Clocked != nil {
		var shift atomic.Int64
		lim = c.limiterOf(nil, c.spec.Clocked(func() time.Time { return time.Now().Add(time.Duration(shift.Load())) }))
		advance := func(d time.Duration) { shift.Add(int64(d)); c.h.Advance(d) }
		advance(l.Period)
		if r, err := lim.Allow(c.ctx, "p11", l); err != nil || !r.Allowed || r.Remaining != l.Rate-1 {
			c.t.Errorf("property 11: clocked, one Period later: %+v, %v; want admitted with %d remaining", r, err, l.Rate-1)
		}
		persist()
		advance(l.Period)
	} else {
		if _, err := lim.Allow(c.ctx, "p11", l); err != nil {
			c.t.Fatalf("property 11: %v", err)
		}
		persist()
		c.h.Advance(l.Period)
	}
	if r, err := lim.Allow(c.ctx, "p11", l); err != nil || !r.Allowed || r.Remaining != l.Rate-1 {
		c.t.Errorf("property 11: one Period after a key was stripped: %+v, %v; want admitted with %d remaining", r, err, l.Rate-1)
	}
	for _, k := range c.keys() {
		if c.pttl(k) == -1 {
			if _, err := c.do(store.Cmd{Name: "DEL", Args: []any{k}}); err != nil {
				c.t.Fatalf("DEL %s: %v", k, err)
			}
		}
	}
}

// Property 12: a mixed workload with a clock that jumps between round trips
// leaves every key with a bounded TTL (the sweep after every check).
func checkBoundedTTLs(c *checker) {
	short := limiter.Per(3, 100*time.Millisecond)
	long := limiter.PerSecond(5)
	c.window(long)
	hs := newHookStore(c.h.Store())
	lim := c.limiter(hs.store())
	step := 10 * time.Millisecond
	if !c.h.Caps().VirtualClock {
		step = 3 * time.Millisecond
	}
	for i := 0; i < 60; i++ {
		d := time.Duration(i*7%13) * step
		hs.arm(func() { c.h.Advance(d) })
		subject := fmt.Sprintf("p12-%d", i%3)
		var err error
		switch i % 3 {
		case 0:
			_, err = lim.Allow(c.ctx, subject, short)
		case 1:
			_, err = lim.AllowN(c.ctx, subject, int64(i%4+1), long)
		default:
			_, err = lim.Allow(c.ctx, subject, short, long)
		}
		if err != nil {
			c.t.Errorf("property 12: call %d: %v", i, err)
		}
	}
	// One more admitted call, so that a key is left for the sweep at the
	// end of the check even when a slow machine let the workload's windows
	// end before it did; up to three, on fresh subjects, for an
	// epoch-aligned window's key, which may end a moment after its call.
	for try := range 3 {
		subject := fmt.Sprintf("p12-last-%d", try)
		if r, err := lim.Allow(c.ctx, subject, long); err != nil || !r.Allowed {
			c.t.Errorf("property 12: the last call on a fresh subject: %+v, %v", r, err)
		}
		if len(c.keys()) > 0 {
			return
		}
	}
	c.t.Errorf("property 12: the workload left no keys to check (three last calls on fresh subjects either)")
}

// Property 16: NOSCRIPT (SCRIPT FLUSH, a restart) is invisible.
func checkNoScript(c *checker) {
	caps := c.h.Caps()
	if !caps.Private && !caps.Restart {
		c.t.Skip("shared server: the suite neither flushes its scripts nor restarts it")
	}
	l := limiter.PerHour(100)
	c.window(l)
	lim := c.limiter(nil)
	if _, err := lim.Allow(c.ctx, "p16", l); err != nil {
		c.t.Fatalf("property 16: %v", err)
	}
	if caps.Private {
		for _, n := range c.h.Nodes() {
			if rs, err := n.Do(c.ctx, store.Cmd{Name: "SCRIPT", Args: []any{"FLUSH"}}); err != nil || rs[0].Err != nil {
				c.t.Fatalf("SCRIPT FLUSH: %v %v", err, rs)
			}
		}
		r, err := lim.AllowN(c.ctx, "p16", 3, l)
		if err != nil || !r.Allowed {
			c.t.Errorf("property 16: first call after SCRIPT FLUSH = %+v, %v; want admitted", r, err)
		}
		if n := c.counter("p16", l); n != 4 {
			c.t.Errorf("property 16: counter after SCRIPT FLUSH is %d, want 4 (1 + 3, counted once)", n)
		}
	}
	if caps.Restart {
		// A client that had not yet seen its connection close when the
		// call was made may fail that one call, unsent, as an unknown
		// outcome (a reader goroutine that has not run yet, on a busy
		// machine): it must not have run. Such a restart is tried again,
		// up to 3 in all; a store that fails the first call after every
		// restart fails the property.
		for try := 1; ; try++ {
			if err := c.h.Restart(); err != nil {
				c.t.Fatalf("restart: %v", err)
			}
			r, err := lim.AllowN(c.ctx, "p16", 2, l)
			n := c.counter("p16", l)
			if errors.Is(err, store.ErrUnknownOutcome) && n == 0 && try < 3 {
				c.t.Logf("property 16: first call after restart %d failed unsent (%v); restarting again", try, err)
				continue
			}
			if err != nil || !r.Allowed {
				c.t.Errorf("property 16: first call after restart %d = %+v, %v; want admitted", try, r, err)
			}
			if n != 2 {
				c.t.Errorf("property 16: counter after restart %d is %d, want 2", try, n)
			}
			break
		}
	}
}

// Property 19: a lost reply is counted at most once.
func checkLostReply(c *checker) {
	if c.spec.Commit == "" {
		c.t.Skip("the spec names no commit command")
	}
	l := limiter.PerHour(100)
	c.window(l)
	// Load any script through a direct connection first, so the proxied
	// call's commit command is the one that runs.
	if _, err := c.limiter(nil).Allow(c.ctx, "p19-warm", l); err != nil {
		c.t.Fatalf("property 19: warm-up: %v", err)
	}
	p, st := c.proxied()
	lim := c.limiter(st)
	open := c.limiter(st, limiter.WithFailMode(limiter.FailOpen))

	// counted is how many of the calls so far ran in Redis: each call whose
	// reply was lost ran, unless the reply lost was a NOSCRIPT (the server's
	// script cache emptied meanwhile, say by a SCRIPT FLUSH on a server
	// that check shares with others): then it ran nothing.
	counted := int64(0)
	ran := func() string {
		if bytes.HasPrefix(p.Dropped(), []byte("-NOSCRIPT")) {
			return " (its lost reply was a NOSCRIPT: it ran nothing)"
		}
		counted++
		return ""
	}
	p.DropReply(c.spec.Commit)
	r, err := lim.Allow(c.ctx, "p19", l)
	if !errors.Is(err, store.ErrUnknownOutcome) {
		c.t.Errorf("property 19: a lost reply returned %+v, %v; want an error wrapping store.ErrUnknownOutcome", r, err)
	}
	if how, n := ran(), c.counter("p19", l); n != counted {
		c.t.Errorf("property 19: after one call whose reply was lost the counter is %d, want %d%s", n, counted, how)
	}

	// The same with the connection reset instead of closed: the client's
	// read fails with "connection reset by peer" (an error of the socket,
	// not the end of the stream), after the command was sent all the same.
	p.ResetReply(c.spec.Commit)
	r, err = c.unsentAgain("property 19: the call after a lost reply, whose reply a connection reset loses", p, func() (limiter.Result, error) {
		return lim.Allow(c.ctx, "p19", l)
	})
	if !errors.Is(err, store.ErrUnknownOutcome) {
		c.t.Errorf("property 19: a reply lost to a connection reset returned %+v, %v; want an error wrapping store.ErrUnknownOutcome", r, err)
	}
	if how, n := ran(), c.counter("p19", l); n != counted {
		c.t.Errorf("property 19: after a call whose reply was lost to a connection reset the counter is %d, want %d%s", n, counted, how)
	}

	p.DropReply(c.spec.Commit)
	r, err = c.unsentAgain("property 19: the fail-open call after a lost reply", p, func() (limiter.Result, error) {
		return open.Allow(c.ctx, "p19", l)
	})
	if err != nil || !r.Allowed || !r.Degraded || !errors.Is(r.Cause, store.ErrUnknownOutcome) {
		c.t.Errorf("property 19: fail-open with a lost reply = %+v, %v; want allowed, degraded, cause ErrUnknownOutcome", r, err)
	}
	if how, n := ran(), c.counter("p19", l); n != counted {
		c.t.Errorf("property 19: after two lost replies the counter is %d, want %d%s", n, counted, how)
	}

	r, err = c.unsentAgain("property 19: the call after the lost replies", p, func() (limiter.Result, error) {
		return lim.Allow(c.ctx, "p19", l)
	})
	if want := l.Rate - counted - 1; err != nil || !r.Allowed || r.Degraded || r.Remaining != want {
		c.t.Errorf("property 19: the next call = %+v, %v; want admitted with %d remaining", r, err, want)
	}

	// AllowMany: an ask whose reply was lost is an unknown outcome, and
	// ran at most once (a store's Batch that sent it again would count it
	// twice); the one whose reply the proxy read ran (the proxy forwards
	// nothing after it on that connection).
	asks := []limiter.Ask{{Key: "p19-many-a", Limits: []limiter.Limit{l}}, {Key: "p19-many-b", Limits: []limiter.Limit{l}}}
	p.DropReply(c.spec.Commit)
	ans := lim.AllowMany(c.ctx, asks)
	noscript := bytes.HasPrefix(p.Dropped(), []byte("-NOSCRIPT"))
	lost, ranLost := 0, int64(0)
	for i, a := range ans {
		n := c.counter(asks[i].Key, l)
		switch {
		case errors.Is(a.Err, store.ErrUnknownOutcome):
			lost++
			ranLost += n
			if n > 1 {
				c.t.Errorf("property 19: AllowMany: ask %d, whose reply was lost: the counter is %d, want at most 1 (it ran once, or was not sent)", i, n)
			}
		case a.Err != nil:
			c.t.Errorf("property 19: AllowMany with a lost reply: ask %d = %v; want an error wrapping store.ErrUnknownOutcome, or an answer", i, a.Err)
		case !a.Result.Allowed || n != 1:
			c.t.Errorf("property 19: AllowMany with a lost reply: ask %d = %+v, counter %d; want admitted, counted once", i, a.Result, n)
		}
	}
	switch {
	case lost == 0 && p.Dropped() != nil:
		c.t.Errorf("property 19: AllowMany: a reply was lost (%q), but no ask's outcome is unknown: %+v", p.Dropped(), ans)
	case lost > 0 && ranLost == 0 && !noscript:
		c.t.Errorf("property 19: AllowMany: %d asks' outcome unknown, none counted; want the one whose reply was lost counted", lost)
	}
}
