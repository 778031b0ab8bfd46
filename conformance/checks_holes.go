package conformance

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// Property 27: replies slower than the window. Every reply comes back
// later than the window is long, so a strategy that picks a window before
// it sends (or decides on values that expired meanwhile) meets windows that
// are over. Whatever it does, it may admit at most Rate per window that
// existed while the load ran. A virtual clock is moved along with the real
// one for this check: the delays are real.
func checkSlowerThanWindow(c *checker) {
	// The bound counts windows, the admissions of a strategy that admits in
	// windows that are over count completed calls: the check can fail only
	// while calls complete faster than windows pass. A loaded machine (the
	// race detector, other packages' tests beside it) completes a few
	// hundred delayed calls a second, whatever the number of callers, so
	// the windows are long enough (100 a second) to stay well below that,
	// and the delay is several windows long (a window picked before the
	// first round trip is over, with any grace of up to a window, when the
	// second one runs).
	l := limiter.Per(1, 10*time.Millisecond)
	const delay = 50 * time.Millisecond
	// Enough callers that, at the delay, calls complete about 30 times as
	// fast as windows pass on an idle machine.
	const callers = 300
	dur := 600 * time.Millisecond
	c.window(l)
	hs := newHookStore(c.h.Store())
	hs.setEvery(func() { time.Sleep(delay) })
	lim := c.limiter(hs.store())
	if c.h.Caps().VirtualClock {
		// The virtual clock follows the real one: moved by a ticker, and
		// at the end of every delayed round trip, so that the next round
		// trip of the same call meets the server's clock at least the
		// delay later, however rarely a loaded machine runs the ticker
		// (it once moved so rarely that the control passed).
		var clockMu sync.Mutex
		last := time.Now()
		follow := func() {
			clockMu.Lock()
			defer clockMu.Unlock()
			now := time.Now()
			c.h.Advance(now.Sub(last))
			last = now
		}
		hs.setEvery(func() {
			time.Sleep(delay)
			follow()
		})
		stop := make(chan struct{})
		var ticker sync.WaitGroup
		ticker.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(500 * time.Microsecond):
				}
				follow()
			}
		})
		defer ticker.Wait()
		defer close(stop)
	}
	// hard: errors that are neither a deadline, an unknown outcome nor
	// contention (what a loaded machine makes of a delayed call)
	var admitted, denied, failed, hard atomic.Int64
	var mu sync.Mutex
	var errs []error
	t0 := c.serverTime()
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
				r, err := lim.Allow(ctx, "p27", l)
				cancel()
				switch {
				case err != nil:
					failed.Add(1)
					if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, store.ErrUnknownOutcome) && !errors.Is(err, limiter.ErrContention) {
						hard.Add(1)
					}
					mu.Lock()
					if len(errs) < 3 {
						errs = append(errs, err)
					}
					mu.Unlock()
				case r.Allowed:
					admitted.Add(1)
				default:
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	hs.setEvery(nil)
	elapsed := c.serverTime().Sub(t0)
	// Windows that existed in the elapsed time: for first-request windows
	// at most elapsed/Period + 1; for epoch-aligned ones the partial
	// windows at either end add one more.
	windows := int64(elapsed/l.Period) + 2
	if admitted.Load()+denied.Load() == 0 {
		if hard.Load() == 0 {
			// every call ran out of time: nothing was checked, and
			// nothing was found wrong either
			c.t.Skipf("property 27: with every reply %s later than its request, no call was decided in time (%d deadlines, unknown outcomes or contention: a machine too busy, or an adapter that makes delayed calls wait on each other)%s",
				delay, failed.Load(), firstErrs(errs))
		}
		c.t.Fatalf("property 27: with every reply %s later than its request, no call was decided (%d errors)%s: nothing was checked",
			delay, failed.Load(), firstErrs(errs))
	}
	if a := admitted.Load(); a > windows*l.Rate {
		c.t.Errorf("property 27: with every reply %s later than its request, %d admitted in %s of server time at %s: at most %d windows existed, so at most %d may be admitted (admissions counted in a window that was already over, or in a key that expired in the same step)",
			delay, a, elapsed.Round(time.Millisecond), l, windows, windows*l.Rate)
	}
	c.t.Logf("property 27: %s: %d admitted, %d denied, %d errors in %s of server time (at most %d windows)%s",
		l, admitted.Load(), denied.Load(), failed.Load(), elapsed.Round(time.Millisecond), windows, firstErrs(errs))
}

// Property 28: cancel between round trips. A decision whose context ends
// right after its first round trip (the client went away, a deadline) may
// fail or be denied, but it leaves no over-count: a denied request
// consumes nothing from any of its limits.
func checkCancelBetweenRoundTrips(c *checker) {
	ten := limiter.Limit{Rate: 10, Period: time.Hour, Name: "ten"}
	qps := limiter.Limit{Rate: 1, Period: time.Hour, Name: "qps"}
	qpd := limiter.Limit{Rate: 100, Period: 24 * time.Hour, Name: "qpd"}
	c.window(ten, qpd)
	hs := newHookStore(c.h.Store())
	lim := c.limiter(hs.store())
	cancelled := func(cost int64, subject string, ls ...limiter.Limit) (limiter.Result, error) {
		ctx, cancel := context.WithCancel(c.ctx)
		defer cancel()
		hs.arm(cancel)
		defer hs.arm(nil)
		return lim.AllowN(ctx, subject, cost, ls...)
	}

	if r, err := lim.AllowN(c.ctx, "p28", 8, ten); err != nil || !r.Allowed {
		c.t.Fatalf("property 28: AllowN(8) of 10 = %+v, %v; want admitted", r, err)
	}
	r5, err5 := cancelled(5, "p28", ten)
	if err5 == nil && r5.Allowed {
		c.t.Errorf("property 28: AllowN(5) with 2 of 10 left was admitted: %+v", r5)
	}
	if r, err := lim.AllowN(c.ctx, "p28", 2, ten); err != nil || !r.Allowed || r.Remaining != 0 {
		c.t.Errorf("property 28: after a denied AllowN(5) whose context ended between round trips (it returned %+v, %v), AllowN(2) with 2 of 10 left = %+v, %v; want admitted with 0 remaining (the denied request was charged)", r5, err5, r, err)
	}

	if r, err := lim.Allow(c.ctx, "p28-multi", qps, qpd); err != nil || !r.Allowed {
		c.t.Fatalf("property 28: first call of qps+qpd = %+v, %v; want admitted", r, err)
	}
	const denials = 5
	for i := range denials {
		if r, err := cancelled(1, "p28-multi", qps, qpd); err == nil && r.Allowed {
			c.t.Errorf("property 28: call %d past qps=1 was admitted: %+v", i+2, r)
		}
	}
	r, err := lim.Peek(c.ctx, "p28-multi", qpd)
	if err != nil || r.Remaining != qpd.Rate-1 {
		c.t.Errorf("property 28: after 1 admitted and %d denied calls whose contexts ended between round trips, qpd (100/day) = %+v, %v; want %d remaining (denied calls were charged to the limit that did not deny)", denials, r, err, qpd.Rate-1)
	}
}

// Property 29: a corrupt counter. One of three limits' keys holds text that
// is not a base-10 integer, or a hash: the call is an error (never an
// admission, never a quiet reset of the counter), and no other limit's key
// moved; with FailOpen it is admitted Degraded, and still nothing moved.
// Then the same for one limit alone (a call a strategy may decide on a
// shorter path).
func checkCorruptCounter(c *checker) {
	ls := []limiter.Limit{
		{Rate: 10, Period: time.Hour, Name: "ca"},
		{Rate: 10, Period: time.Hour, Name: "cb"},
		{Rate: 10, Period: time.Hour, Name: "cc"},
	}
	c.window(ls...)
	lim := c.limiter(nil)
	open := c.limiter(nil, limiter.WithFailMode(limiter.FailOpen))
	// (9223372036854775807: an integer INCRBY reads and cannot add to;
	// 2^60: one it adds to, beyond the 2^53 that Lua's numbers hold
	// exactly, and that no limit reaches)
	bads := []string{"1.5", " 3", "0x2", "1e0", "3 ", "99999999999999999999", "9223372036854775807", "1152921504606846976", "hash"}
	if c.spec.CountsDownFrom != 0 {
		// a count below zero
		bads = append(bads, strconv.FormatInt(c.spec.CountsDownFrom+40, 10))
		// and one far above any rate, below zero as stored: DECRBY from
		// it is below zero too, as from a key the call created (a
		// strategy that reads any value below zero as one it created
		// admitted into it)
		bads = append(bads, "-3")
	} else if !c.spec.Compensates {
		// a count below zero, which INCRBY reads and adds to (a give-back
		// that took back too much, a DECR by hand): a strategy that counts
		// first and checks only the upper bound admits Rate+5 in the window.
		// (A compensating strategy's take-back that meets a reset key
		// leaves one, which it reads as 0.)
		bads = append(bads, "-5")
	}
	for _, v := range []string{"+3", "007"} {
		// Redis's INCRBY refuses a sign and leading zeros; some servers
		// (the embedded miniredis) read them as integers, and there a
		// strategy may too.
		if !c.incrReads(v) {
			bads = append(bads, v)
		}
	}
	for vi, bad := range bads {
		subject := fmt.Sprintf("p29-%d", vi)
		if r, err := lim.AllowN(c.ctx, subject, 2, ls...); err != nil || !r.Allowed {
			c.t.Fatalf("property 29: first call = %+v, %v; want admitted", r, err)
		}
		keys := c.limitKeys(subject, ls)
		victim := (1 + vi) % len(ls) // the middle key first: writes before and after it
		c.corrupt(keys[victim], bad)
		before := c.values(keys)
		what := fmt.Sprintf("%s's counter %q", ls[victim].Name, bad)
		if bad == "hash" {
			what = ls[victim].Name + "'s key a hash"
		}
		r, err := lim.AllowN(c.ctx, subject, 1, ls...)
		switch {
		case err == nil:
			c.t.Errorf("property 29: with %s the call returned %+v and no error; want an error", what, r)
		case !errors.Is(err, limiter.ErrCorruptCounter):
			c.t.Errorf("property 29: with %s the call's error is %v; want one wrapping limiter.ErrCorruptCounter (an observer files it as a corrupt counter, not an outage)", what, err)
		default:
			c.t.Logf("property 29: with %s: %v", what, err)
		}
		c.assertUnmoved(what, "the call", keys, before)
		if r, err := lim.Peek(c.ctx, subject, ls...); !errors.Is(err, limiter.ErrCorruptCounter) {
			c.t.Errorf("property 29: with %s Peek returned %+v, %v; want an error wrapping limiter.ErrCorruptCounter, as a counting call", what, r, err)
		}
		c.assertUnmoved(what, "Peek", keys, before)
		r, err = open.AllowN(c.ctx, subject, 1, ls...)
		if err != nil || (r.Allowed && !r.Degraded) {
			c.t.Errorf("property 29: FailOpen with %s = %+v, %v; want a Degraded result (or a denial), no error", what, r, err)
		}
		c.assertUnmoved(what, "the FailOpen call", keys, before)
	}
	// One limit alone, which a strategy may decide on a shorter path (one
	// that writes before it reads, say): the same error, nothing moved.
	one := ls[:1]
	for vi, bad := range bads {
		subject := fmt.Sprintf("p29-one-%d", vi)
		if r, err := lim.AllowN(c.ctx, subject, 2, one...); err != nil || !r.Allowed {
			c.t.Fatalf("property 29: first call with one limit = %+v, %v; want admitted", r, err)
		}
		keys := c.limitKeys(subject, one)
		c.corrupt(keys[0], bad)
		before := c.values(keys)
		what := fmt.Sprintf("the one limit's counter %q", bad)
		if bad == "hash" {
			what = "the one limit's key a hash"
		}
		if r, err := lim.AllowN(c.ctx, subject, 1, one...); !errors.Is(err, limiter.ErrCorruptCounter) {
			c.t.Errorf("property 29: with %s the call = %+v, %v; want an error wrapping limiter.ErrCorruptCounter", what, r, err)
		}
		c.assertUnmoved(what, "the call", keys, before)
	}
}

// incrReads reports whether the server's INCRBY reads v as an integer,
// tried on a scratch key under the check's prefix.
func (c *checker) incrReads(v string) bool {
	c.t.Helper()
	key := c.prefix + ":probe"
	if r, err := c.do(store.Cmd{Name: "SET", Args: []any{key, v, "PX", 10000}}); err != nil || r.Err != nil {
		c.t.Fatalf("SET %s: %v %v", key, err, r.Err)
	}
	r, err := c.do(store.Cmd{Name: "INCRBY", Args: []any{key, 0}})
	if err != nil {
		c.t.Fatalf("INCRBY %s: %v", key, err)
	}
	if _, err := c.do(store.Cmd{Name: "DEL", Args: []any{key}}); err != nil {
		c.t.Fatalf("DEL %s: %v", key, err)
	}
	return r.Err == nil
}

// limitKeys returns, for each limit, the one key of subject that counts it:
// the limit's key, or a key under it (a time-bucketed strategy's).
func (c *checker) limitKeys(subject string, ls []limiter.Limit) []string {
	c.t.Helper()
	all := c.keys()
	out := make([]string, len(ls))
	for i, l := range ls {
		base, err := limiter.Key(c.prefix, subject, l)
		if err != nil {
			c.t.Fatalf("key: %v", err)
		}
		var found []string
		for _, k := range all {
			if k == base || strings.HasPrefix(k, base+":") {
				found = append(found, k)
			}
		}
		if len(found) != 1 {
			c.t.Fatalf("limit %s of %s: want one key, found %q", l, subject, found)
		}
		out[i] = found[0]
	}
	return out
}

// corrupt replaces key's value by bad ("hash": a hash), keeping its TTL
// (without KEEPTTL, which Redis 5 lacks).
func (c *checker) corrupt(key, bad string) {
	c.t.Helper()
	ttl := max(c.pttl(key), 1000)
	cmds := []store.Cmd{{Name: "SET", Args: []any{key, bad, "PX", ttl}}}
	if bad == "hash" {
		cmds = []store.Cmd{
			{Name: "DEL", Args: []any{key}},
			{Name: "HSET", Args: []any{key, "count", 1}},
			{Name: "PEXPIRE", Args: []any{key, ttl}},
		}
	}
	for _, cmd := range cmds {
		if r, err := c.do(cmd); err != nil || r.Err != nil {
			c.t.Fatalf("%s %s: %v %v", cmd.Name, key, err, r.Err)
		}
	}
}

// values returns each key's type and value (a string's), to compare.
func (c *checker) values(keys []string) []string {
	c.t.Helper()
	out := make([]string, len(keys))
	for i, k := range keys {
		r, err := c.do(store.Cmd{Name: "TYPE", Args: []any{k}})
		if err != nil || r.Err != nil {
			c.t.Fatalf("TYPE %s: %v %v", k, err, r.Err)
		}
		typ, _ := store.String(r.Val)
		out[i] = typ
		if typ == "string" {
			r, err := c.do(store.Cmd{Name: "GET", Args: []any{k}})
			if err != nil || r.Err != nil {
				c.t.Fatalf("GET %s: %v %v", k, err, r.Err)
			}
			v, _ := store.String(r.Val)
			out[i] += " " + v
		}
	}
	return out
}

func (c *checker) assertUnmoved(what, call string, keys, before []string) {
	c.t.Helper()
	after := c.values(keys)
	for i := range keys {
		if after[i] != before[i] {
			c.t.Errorf("property 29: with %s, %s changed %q from %q to %q (a call that failed wrote some of its limits)", what, call, keys[i], before[i], after[i])
		}
	}
}

// Property 30: a period change. The same named limit with a shorter period
// (a rules reload from 1/day to 1 per 500 ms) takes effect with the next call: its
// window ends within the new period, the Result says so, and the subject
// is admitted again once the new window is over. The state a limit in use
// leaves under the old rule (3 of 10 per day used, then 2 per 500 ms; for
// a refilling strategy also its burst lowered from 100 to 10) is a valid
// state under the new one: never an error (ErrCorruptCounter, which
// FailOpen would turn into admitting everything).
func checkPeriodChange(c *checker) {
	checkRuleLowered(c)
	checkPeriodLengthened(c)
	checkPeekAfterRuleChange(c)
	long := limiter.Limit{Rate: 1, Period: 24 * time.Hour, Name: "api"}
	short := limiter.Limit{Rate: 1, Period: 500 * time.Millisecond, Name: "api"}
	other := limiter.Limit{Rate: 1000, Period: time.Hour, Name: "other"} // never binds
	c.window(long, short, other)
	lim := c.limiter(nil)
	bound := c.spec.life(short.Period) - c.spec.TTLSlack + min(c.spec.TTLSlack, short.Period)
	// The limit alone, and beside one that never binds: a strategy's path
	// for several limits (FixedWindow's) is code of its own, and must
	// shorten the old window as its path for one does.
	// By Allow, and by AllowMany (a strategy that decides many asks in
	// one script runs its own copy of these paths there).
	for _, way := range []struct {
		beside []limiter.Limit
		many   bool
	}{{nil, false}, {[]limiter.Limit{other}, false}, {nil, true}, {[]limiter.Limit{other}, true}} {
		beside := way.beside
		subject, how := "p30", ""
		if beside != nil {
			subject, how = "p30-beside", " beside "+other.String()
		}
		if way.many {
			subject, how = subject+"-many", how+" by AllowMany"
		}
		with := func(l limiter.Limit) []limiter.Limit { return append([]limiter.Limit{l}, beside...) }
		allow := func(ls ...limiter.Limit) (limiter.Result, error) {
			if way.many {
				a := lim.AllowMany(c.ctx, []limiter.Ask{{Key: subject, Limits: ls}})[0]
				return a.Result, a.Err
			}
			return lim.Allow(c.ctx, subject, ls...)
		}
		if r, err := allow(with(long)...); err != nil || !r.Allowed {
			c.t.Fatalf("property 30: first call at %s%s = %+v, %v; want admitted", long, how, r, err)
		}
		if r, err := allow(with(long)...); err != nil || r.Allowed {
			c.t.Fatalf("property 30: second call at %s%s = %+v, %v; want denied", long, how, r, err)
		}
		r, err := allow(with(short)...)
		if err != nil {
			c.t.Fatalf("property 30: first call at %s%s: %v", short, how, err)
		}
		if r.ResetAfter > bound || (!r.Allowed && r.RetryAfter > bound) {
			c.t.Errorf("property 30: the first call after %s became %s%s = %+v: ResetAfter %s, RetryAfter %s, want at most %s (the old, longer window is kept)", long, short, how, r, r.ResetAfter, r.RetryAfter, bound)
		}
		if !c.spec.Aligned {
			// The limit's one key now ends within the new period. (Epoch-aligned
			// strategies count the new period in a new window's key; the old
			// window's key ends with its own window.)
			keys := c.limitKeys(subject, []limiter.Limit{short})
			if p := time.Duration(c.pttl(keys[0])) * time.Millisecond; p > bound {
				c.t.Errorf("property 30: after the first call at %s%s, %q has PTTL %s, above the new window %s", short, how, keys[0], p, bound)
			}
		}
		c.h.Advance(bound + 5*time.Millisecond)
		if r, err := allow(with(short)...); err != nil || !r.Allowed {
			c.t.Errorf("property 30: %s after the change to %s%s, the call = %+v, %v; want admitted (the subject is still locked out by the old window)", bound+5*time.Millisecond, short, how, r, err)
		}
	}
}

// checkPeriodLengthened is property 30 on a limit in use whose period is
// lengthened (5 per second, then 5 per 10 s, a rules reload half a second
// after the 5 were admitted): a denial under the new rule holds for its
// RetryAfter, so the same call 1 ms before it ends is denied, and made
// when it ends, admitted. The denial is made by AllowN, and by AllowMany
// (beside another subject's ask, so that a strategy that decides many
// asks in one script does). (A sliding log kept its units' expiry from the
// old period: its key expired after a second, and a call was admitted 9 s
// before the RetryAfter it had just been given.) On the virtual clock.
func checkPeriodLengthened(c *checker) {
	if !c.h.Caps().VirtualClock {
		return
	}
	short := limiter.Limit{Rate: 5, Period: time.Second, Name: "login"}
	long := limiter.Limit{Rate: 5, Period: 10 * time.Second, Name: "login"}
	c.window(short, long)
	lim := c.limiter(nil)
	for _, many := range []bool{false, true} {
		subject := fmt.Sprintf("p30-longer-%v", many)
		if r, err := lim.AllowN(c.ctx, subject, 5, short); err != nil || !r.Allowed {
			c.t.Fatalf("property 30: AllowN(5) at %s = %+v, %v; want admitted", short, r, err)
		}
		c.h.Advance(500 * time.Millisecond)
		var r limiter.Result
		var err error
		if many {
			as := lim.AllowMany(c.ctx, []limiter.Ask{{Key: subject, Cost: 5, Limits: []limiter.Limit{long}}, {Key: subject + "-other", Cost: 1, Limits: []limiter.Limit{long}}})
			r, err = as[0].Result, as[0].Err
		} else {
			r, err = lim.AllowN(c.ctx, subject, 5, long)
		}
		if err != nil {
			c.t.Fatalf("property 30: AllowN(5) at %s, 500 ms after 5 at %s (AllowMany: %v): %v", long, short, many, err)
		}
		if r.Allowed || r.RetryAfter <= time.Millisecond {
			continue // the new rule found room, or a denial too short to judge
		}
		c.h.Advance(r.RetryAfter - time.Millisecond)
		if r2, err := lim.AllowN(c.ctx, subject, 5, long); err != nil || r2.Allowed {
			c.t.Errorf("property 30: denied at %s (500 ms after 5 admitted at %s; AllowMany: %v) with RetryAfter %s, then 1 ms before it ended AllowN(5) = %+v, %v; want denied", long, short, many, r.RetryAfter, r2, err)
			continue
		}
		if c.spec.DeniedConsume {
			continue
		}
		c.h.Advance(time.Millisecond)
		if r3, err := lim.AllowN(c.ctx, subject, 5, long); err != nil || !r3.Allowed {
			c.t.Errorf("property 30: denied at %s (AllowMany: %v) with RetryAfter %s, then made when it ended, AllowN(5) = %+v, %v; want admitted", long, many, r.RetryAfter, r3, err)
		}
	}
}

// checkPeekAfterRuleChange is property 30 for a Peek made right after a
// rule change, before any call writes under the new rule: a Peek reports
// the state as it is, so its RetryAfter holds: when it ends an Allow is
// admitted, and (on the virtual clock) 1 ms before it ends a Peek still
// denies. The changes keep the limit's key (a name): its period
// shortened, and for a refilling strategy its burst lowered, its rate
// raised, and (an interval that is not whole milliseconds) lowered. (A Peek reported the state as the next write would repair it,
// from that write's moment: a window one new period long, a TAT within
// the new burst, a bucket refilled at the new rate. No write made the
// repair, and the Allow at the end of the Peek's RetryAfter was denied,
// for as long again. And a bucket kept until the old, faster rate had
// refilled it was reported refilling at the new rate past that: a Peek
// 1 ms before its RetryAfter ended was admitted.)
func checkPeekAfterRuleChange(c *checker) {
	if c.spec.DeniedConsume {
		return
	}
	virtual := c.h.Caps().VirtualClock
	type change struct {
		subject  string
		was, now limiter.Limit
	}
	changes := []change{{"p30-peek-period", limiter.Limit{Rate: 10, Period: time.Second, Name: "peek-p"}, limiter.Limit{Rate: 10, Period: 100 * time.Millisecond, Name: "peek-p"}}}
	if c.spec.Refills {
		changes = append(changes,
			change{"p30-peek-burst", limiter.Limit{Rate: 10, Period: time.Second, Burst: 10, Name: "peek-b"}, limiter.Limit{Rate: 10, Period: time.Second, Burst: 2, Name: "peek-b"}},
			change{"p30-peek-rate", limiter.Limit{Rate: 2, Period: 200 * time.Millisecond, Burst: 5, Name: "peek-r"}, limiter.Limit{Rate: 20, Period: 200 * time.Millisecond, Burst: 5, Name: "peek-r"}},
			// an interval that is not whole milliseconds, to another
			change{"p30-peek-scale", limiter.Limit{Rate: 3, Period: time.Second, Name: "peek-s"}, limiter.Limit{Rate: 30, Period: 10 * time.Second, Name: "peek-s"}},
			// and to a slower rate of the same period: the state, kept
			// until the old rule had refilled it (a second: time for the
			// check on a real clock, where a shorter life could end
			// between its reads), is full sooner than the new rate
			// refills it
			change{"p30-peek-slower", limiter.Limit{Rate: 30, Period: 10 * time.Second, Burst: 3, Name: "peek-l"}, limiter.Limit{Rate: 3, Period: 10 * time.Second, Burst: 3, Name: "peek-l"}})
	}
	lim := c.limiter(nil)
	judged := 0
	for _, ch := range changes {
		c.window(ch.was, ch.now)
		if c.spec.Aligned {
			c.alignTo(ch.was.Period, 0)
		}
		// the old rule's quota used up, one call at a time
		used := 0
		for range 1000 {
			r, err := lim.Allow(c.ctx, ch.subject, ch.was)
			if err != nil {
				c.t.Fatalf("property 30: call %d at %s: %v", used+1, ch.was, err)
			}
			if !r.Allowed {
				break
			}
			used++
		}
		if used == 0 {
			c.t.Fatalf("property 30: the first call at %s was denied", ch.was)
		}
		c.h.Advance(time.Millisecond)
		before := c.snapshot(ch.subject)
		r, err := lim.Peek(c.ctx, ch.subject, ch.now)
		if err != nil {
			c.t.Fatalf("property 30: Peek at %s after %d used at %s: %v", ch.now, used, ch.was, err)
		}
		// A Peek writes nothing, not even to a state of another rule.
		for k, b := range before {
			a, ok := c.snapshot(ch.subject)[k]
			switch {
			case !ok:
				c.t.Errorf("property 30: a Peek at %s deleted %q (written at %s)", ch.now, k, ch.was)
			case a.val != b.val || a.ttl > b.ttl || (virtual && a.ttl != b.ttl):
				c.t.Errorf("property 30: a Peek at %s rewrote %q (written at %s): %q, PTTL %d ms → %q, PTTL %d ms", ch.now, k, ch.was, b.val, b.ttl, a.val, a.ttl)
			}
		}
		if r.Allowed || r.RetryAfter <= time.Millisecond {
			continue // the new rule finds room, or a denial too short to judge
		}
		judged++
		if virtual {
			c.h.Advance(r.RetryAfter - time.Millisecond)
			if r2, err := lim.Peek(c.ctx, ch.subject, ch.now); err != nil || r2.Allowed {
				c.t.Errorf("property 30: after %d used at %s, a Peek at %s denied with RetryAfter %s; 1 ms before it ended, a Peek = %+v, %v; want denied (the RetryAfter is exact)", used, ch.was, ch.now, r.RetryAfter, r2, err)
				continue
			}
			c.h.Advance(time.Millisecond)
		} else {
			c.h.Advance(r.RetryAfter)
		}
		if r3, err := lim.Allow(c.ctx, ch.subject, ch.now); err != nil || !r3.Allowed {
			c.t.Errorf("property 30: after %d used at %s, a Peek at %s denied with RetryAfter %s; when it ended, Allow = %+v, %v; want admitted (the Peek's RetryAfter was of a state no call had written)", used, ch.was, ch.now, r.RetryAfter, r3, err)
		}
	}
	c.t.Logf("property 30: %d Peeks after a rule change judged", judged)
}

// checkRuleLowered is property 30's half on a limit in use whose rule is
// lowered: the next call is decided, not refused, and the subject is
// admitted once the new rule's window or refill allows. A rule whose rate
// alone changes (its name and period kept) keeps its window's count.
func checkRuleLowered(c *checker) {
	checkRateChange(c)
	type change struct {
		subject  string
		was, now limiter.Limit
		used     int64
	}
	changes := []change{{"p30r", limiter.Limit{Rate: 10, Period: 24 * time.Hour, Name: "api-r"}, limiter.Limit{Rate: 2, Period: 500 * time.Millisecond, Name: "api-r"}, 3}}
	if c.spec.Refills {
		changes = append(changes, change{"p30b", limiter.Limit{Rate: 10, Period: time.Second, Burst: 100, Name: "api-b"}, limiter.Limit{Rate: 10, Period: time.Second, Burst: 10, Name: "api-b"}, 1})
	}
	lim := c.limiter(nil)
	for _, ch := range changes {
		c.window(ch.was, ch.now)
		if r, err := lim.AllowN(c.ctx, ch.subject, ch.used, ch.was); err != nil || !r.Allowed {
			c.t.Fatalf("property 30: %d at %s = %+v, %v; want admitted", ch.used, ch.was, r, err)
		}
		r, err := lim.Allow(c.ctx, ch.subject, ch.now)
		if err != nil {
			c.t.Errorf("property 30: with %d used at %s, the first call after the rule became %s failed: %v (the old rule's state is valid under the new one)", ch.used, ch.was, ch.now, err)
			continue
		}
		if r.Allowed {
			continue
		}
		wait := c.spec.life(ch.now.Period) + 5*time.Millisecond
		c.h.Advance(wait)
		if r, err := lim.Allow(c.ctx, ch.subject, ch.now); err != nil || !r.Allowed {
			c.t.Errorf("property 30: with %d used at %s, then denied at %s, the call %s later = %+v, %v; want admitted", ch.used, ch.was, ch.now, wait, r, err)
		}
	}
}

// Property 31: denials bind. Every denial carries RetryAfter > 0, at most
// the binding limit's window, and binds a limit that denied it: never
// RetryAfter 0, which callers and HTTP middleware read as "admitted", and
// never -1 ("the cost never fits"), as every call here costs 1 of a limit
// of at least 1, which Wait would give up on. The denials are made in a
// window's last millisecond, where a counter's PTTL reads 0.
func checkDenialsBind(c *checker) {
	big := limiter.Limit{Rate: 10_000, Period: time.Hour, Name: "big"} // never binds here
	lim := c.limiter(nil)
	var denials, bad int
	var first string
	judge := func(r limiter.Result, short limiter.Limit) {
		if r.Allowed {
			return
		}
		denials++
		// a wait within the binding limit's own window: a strategy that
		// gave the short limit the long one's window would say an hour
		if r.RetryAfter > 0 && r.RetryAfter <= c.spec.life(short.Period) && r.Index == 0 && r.Limit == short {
			return
		}
		bad++
		if first == "" {
			first = fmt.Sprintf("%+v", r)
		}
	}
	if c.h.Caps().VirtualClock {
		short := limiter.Limit{Rate: 1, Period: time.Second, Name: "short"}
		c.window(short, big)
		for i := range 3 {
			subject := fmt.Sprintf("p31-%d", i)
			if c.spec.Aligned {
				c.alignTo(short.Period, 0)
			}
			if r, err := lim.Allow(c.ctx, subject, short, big); err != nil || !r.Allowed {
				c.t.Fatalf("property 31: first call = %+v, %v; want admitted", r, err)
			}
			// Into the window's last millisecond, a little more each time;
			// for a strategy that reads the server's clock in whole
			// milliseconds (where less than a millisecond left reads as
			// none, and the call is admitted), the millisecond before it.
			left := time.Duration(900-300*i) * time.Microsecond
			if c.spec.MillisecondClock {
				left += time.Millisecond
			}
			c.h.Advance(short.Period - left)
			r, err := lim.Allow(c.ctx, subject, short, big)
			if err != nil {
				c.t.Fatalf("property 31: %v", err)
			}
			judge(r, short)
			c.h.Advance(time.Millisecond)
		}
		// The same with the short limit alone (a strategy's path for one
		// limit, as FixedWindow's, is code of its own), in the window's
		// last millisecond whatever the strategy's clock: a strategy that
		// reads less than a millisecond left as none admits (the next
		// window's first call); any other answer is a denial that binds,
		// and never an error.
		for i := range 3 {
			subject := fmt.Sprintf("p31-one-%d", i)
			if c.spec.Aligned {
				c.alignTo(short.Period, 0)
			}
			if r, err := lim.Allow(c.ctx, subject, short); err != nil || !r.Allowed {
				c.t.Fatalf("property 31: one limit: first call = %+v, %v; want admitted", r, err)
			}
			left := time.Duration(900-300*i) * time.Microsecond
			c.h.Advance(short.Period - left)
			r, err := lim.Allow(c.ctx, subject, short)
			if err != nil {
				c.t.Fatalf("property 31: one limit, a call %s before its window ends: %v", left, err)
			}
			judge(r, short)
			c.h.Advance(time.Millisecond)
		}
	} else {
		// A denial falls in a window's last millisecond one time in five.
		short := limiter.Limit{Rate: 1, Period: 5 * time.Millisecond, Name: "short"}
		c.window(short, big)
		for range 1500 {
			r, err := lim.Allow(c.ctx, "p31", short, big)
			if err != nil {
				c.t.Fatalf("property 31: %v", err)
			}
			judge(r, short)
		}
	}
	if bad > 0 {
		c.t.Errorf("property 31: %d of %d denials did not bind the denying limit with RetryAfter > 0 within its window (never -1: every call costs 1 of a limit of at least 1); the first: %s", bad, denials, first)
	}
	if denials == 0 {
		c.t.Errorf("property 31: no denial to judge: every call was admitted (a window that vanished, or calls slower than the window)")
	}
	c.t.Logf("property 31: %d denials judged", denials)
}

// Property 32: contention never admits. A strategy that gives up under
// contention (an optimistic one with a retry bound of 1) denies or errors:
// with FailOpen, and with FailClosed, admissions never pass the limit and
// none is a Degraded admission caused by limiter.ErrContention: Redis
// answered, so the fail mode does not apply. A run in which no call gave
// up proves nothing and is made again (3 runs at most).
func checkContentionNeverAdmits(c *checker) {
	if c.spec.Optimistic == nil {
		c.t.Skip("the strategy declares no optimistic retries")
	}
	const g, m, rate = 40, 10, 100
	l := limiter.PerHour(rate)
	c.window(l)
	s := c.spec.Optimistic(1)
	for _, mode := range []limiter.FailMode{limiter.FailOpen, limiter.FailClosed} {
		for run := 1; ; run++ {
			if c.contentionRun(s, mode, fmt.Sprintf("p32-%s-%d", mode, run), g, m, l) != 0 {
				break
			}
			if run == 3 {
				c.t.Errorf("property 32: fail mode %s: no call gave up under contention in %d runs of %d callers × %d calls with a retry bound of 1", mode, run, g, m)
				break
			}
		}
	}
}

// contentionRun is one run of property 32; it returns how many calls gave
// up under contention.
func (c *checker) contentionRun(s limiter.Strategy, mode limiter.FailMode, subject string, g, m int, l limiter.Limit) int64 {
	lim := c.limiterOf(nil, s, limiter.WithFailMode(mode))
	var contended, otherDegraded, admitted atomic.Int64
	_, _, errs := hammer(g, m, func(int, int) (limiter.Result, error) {
		r, err := lim.Allow(c.ctx, subject, l)
		switch {
		case err == nil && r.Degraded && errors.Is(r.Cause, limiter.ErrContention):
			contended.Add(1)
			if r.Allowed {
				c.t.Errorf("property 32: fail mode %s: a decision that gave up under contention was admitted: %+v", mode, r)
			}
		case err == nil && r.Degraded:
			otherDegraded.Add(1)
		case err == nil && r.Allowed:
			admitted.Add(1)
		}
		return r, err
	})
	gaveUp := contended.Load()
	for _, e := range errs {
		if errors.Is(e, limiter.ErrContention) {
			gaveUp++
		} else {
			c.t.Errorf("property 32: fail mode %s: %v", mode, e)
		}
	}
	if a := admitted.Load(); a > l.Rate {
		c.t.Errorf("property 32: fail mode %s: %d admitted by decisions not marked Degraded, with limit %d (contention turned into admissions?)", mode, a, l.Rate)
	}
	if n := otherDegraded.Load(); n > 0 {
		c.t.Logf("property 32: fail mode %s: %d decisions degraded by backend errors (a busy machine?), not counted", mode, n)
	}
	c.t.Logf("property 32: fail mode %s: %d admitted, %d gave up under contention, %d errors", mode, admitted.Load(), gaveUp, len(errs))
	if c.t.Failed() {
		return -1 // judged: no need to run again
	}
	return gaveUp
}

// checkRateChange is property 30 for a named limit whose rate alone
// changes, its period kept: its key is the same, and so is the count it
// holds. Lowered from 20 to 10 per hour with 5 used, the next calls are
// decisions (never ErrCorruptCounter), and a window strategy admits
// exactly 5 more; raised from 10 to 20 with 10 used, the next call is
// admitted, and a window strategy says 9 remain.
func checkRateChange(c *checker) {
	lim := c.limiter(nil)
	type change struct {
		subject   string
		was, now  limiter.Limit
		used      int64
		admitted  int   // of 8 calls at the new rate, for a window strategy
		remaining int64 // after the first of them, for a window strategy
	}
	for _, ch := range []change{
		{"p30q-lower", limiter.Limit{Rate: 20, Period: time.Hour, Name: "api-q"}, limiter.Limit{Rate: 10, Period: time.Hour, Name: "api-q"}, 5, 5, 4},
		{"p30q-raise", limiter.Limit{Rate: 10, Period: time.Hour, Name: "api-q"}, limiter.Limit{Rate: 20, Period: time.Hour, Name: "api-q"}, 10, 8, 9},
	} {
		c.window(ch.was, ch.now)
		if r, err := lim.AllowN(c.ctx, ch.subject, ch.used, ch.was); err != nil || !r.Allowed {
			c.t.Fatalf("property 30: %d at %s = %+v, %v; want admitted", ch.used, ch.was, r, err)
		}
		if _, err := lim.Peek(c.ctx, ch.subject, ch.now); err != nil {
			c.t.Errorf("property 30: with %d used at %s, a Peek after the rate became %s failed: %v (the count is valid under the new rate)", ch.used, ch.was, ch.now, err)
		}
		admitted := 0
		var first limiter.Result
		for i := range 8 {
			r, err := lim.Allow(c.ctx, ch.subject, ch.now)
			if err != nil {
				c.t.Errorf("property 30: with %d used at %s, call %d after the rate became %s failed: %v (the count is valid under the new rate)", ch.used, ch.was, i+1, ch.now, err)
				break
			}
			if i == 0 {
				first = r
			}
			if r.Allowed {
				admitted++
			}
		}
		if c.spec.Window && (admitted != ch.admitted || first.Remaining != ch.remaining) {
			c.t.Errorf("property 30: with %d used at %s, then 8 calls at %s: %d admitted, the first leaving %d; want %d admitted, the first leaving %d (the window's count is kept)", ch.used, ch.was, ch.now, admitted, first.Remaining, ch.admitted, ch.remaining)
		}
	}
}

// keyState is a key's value (a string key's; "" for another type) and PTTL.
type keyState struct {
	val string
	ttl int64
}

// snapshot returns the state of every key of subject.
func (c *checker) snapshot(subject string) map[string]keyState {
	out := map[string]keyState{}
	for _, k := range c.keys() {
		if !strings.Contains(k, "{"+subject+"}") {
			continue
		}
		st := keyState{ttl: c.pttl(k)}
		if r, err := c.do(store.Cmd{Name: "GET", Args: []any{k}}); err == nil && r.Err == nil {
			st.val, _ = r.Val.(string)
		}
		out[k] = st
	}
	return out
}
