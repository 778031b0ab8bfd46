package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
)

// Bounds of the network fault checks.
const (
	// faultTimeout is the per-call timeout the fault checks set.
	faultTimeout = 100 * time.Millisecond
	// faultMargin is how much later than faultTimeout a call may return:
	// generous, since a loaded machine wakes timers and goroutines late.
	faultMargin = 900 * time.Millisecond
	// slowReply is how late property 20's slow reply comes: later than a
	// call may take, so that a call that waits for it fails.
	slowReply = faultTimeout + faultMargin + 500*time.Millisecond
	// healthyTimeout is the timeout of the calls the fault checks make when
	// no fault is armed (warm-ups, calls after recovery): long, so that a
	// first call that dials and loads a script is not cut short on a busy
	// machine. A short one would test the machine, not the store.
	healthyTimeout = 2 * time.Second
	// faultWatchdog ends a call that hangs, so a broken store fails the
	// check instead of hanging the suite.
	faultWatchdog = 2*time.Second + healthyTimeout
)

// proxied returns a fault proxy in front of the backend and a store of the
// adapter under test connected through it, or skips.
func (c *checker) proxied() (*redistest.Proxy, store.Store) {
	c.t.Helper()
	switch caps := c.h.Caps(); {
	case caps.Proxy:
	case caps.TLS:
		c.t.Skip("no fault proxy on this TLS backend: a proxy without the server's certificate cannot see the commands")
	default:
		c.t.Skip("no fault proxy on this backend (a Cluster client would go around it)")
	}
	var p *redistest.Proxy
	if h, ok := c.h.(*harness); ok {
		p = h.newProxy(c.t)
	} else {
		p = redistest.NewProxy(c.t, c.h.Addr())
	}
	st, closeSt, err := c.h.Dial(c.ctx, p.Addr())
	if err != nil {
		c.t.Fatalf("dial through the proxy: %v", err)
	}
	c.t.Cleanup(closeSt)
	return p, st
}

// unsentAgain makes a call through proxy p just after a fault broke a
// connection. When the call fails with an outcome-unknown error (or is a
// fail-open decision degraded by one) and p forwarded no command for it,
// so that it never left the client, it is made once more: a client may
// fail one call it never sent on the connection it is still tearing down.
// (rueidis hands the call that was waiting on a broken connection its
// error just before it marks the connection broken, so a call made in
// that instant takes the dead one.)
func (c *checker) unsentAgain(what string, p *redistest.Proxy, call func() (limiter.Result, error)) (limiter.Result, error) {
	c.t.Helper()
	before := forwarded(p)
	r, err := call()
	cause := err
	if err == nil && r.Degraded { // a fail-open decision
		cause = r.Cause
	}
	if errors.Is(cause, store.ErrUnknownOutcome) && forwarded(p) == before {
		c.t.Logf("%s failed before sending anything (%v); calling again", what, cause)
		r, err = call()
	}
	return r, err
}

// forwarded is the number of commands p forwarded, set-up commands aside.
func forwarded(p *redistest.Proxy) int {
	n := 0
	for name, k := range p.Commands() {
		if !setupCommands[name] {
			n += k
		}
	}
	return n
}

// timedAllow calls lim.Allow under a watchdog and reports how long it took.
func (c *checker) timedAllow(lim *limiter.Limiter, subject string, l limiter.Limit) (limiter.Result, error, time.Duration) {
	type out struct {
		r   limiter.Result
		err error
	}
	ch := make(chan out, 1)
	start := time.Now()
	go func() {
		r, err := lim.Allow(c.ctx, subject, l)
		ch <- out{r, err}
	}()
	select {
	case o := <-ch:
		return o.r, o.err, time.Since(start)
	case <-time.After(faultWatchdog):
		return limiter.Result{}, fmt.Errorf("no answer within %s", faultWatchdog), faultWatchdog
	}
}

// Property 20: a reply slower than the deadline returns promptly with a
// timeout, and the next call gets its own reply, never the stale one.
func checkSlowReply(c *checker) {
	p, st := c.proxied()
	l := limiter.PerHour(100)
	c.window(l)
	lim := c.limiter(st, limiter.WithTimeout(faultTimeout))
	healthy := c.limiter(st, limiter.WithTimeout(healthyTimeout))
	if _, err := healthy.Allow(c.ctx, "p20", l); err != nil {
		c.t.Fatalf("property 20: warm-up: %v", err)
	}
	commits := p.Commands()[c.spec.Commit]
	p.Delay(slowReply)
	_, err, took := c.timedAllow(lim, "p20", l)
	if took > faultTimeout+faultMargin {
		c.t.Errorf("property 20: a slow reply held the call for %s with a %s timeout", took, faultTimeout)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		c.t.Errorf("property 20: a reply past the deadline returned %v; want an error wrapping context.DeadlineExceeded", err)
	}
	p.Delay(0)
	time.Sleep(slowReply + faultTimeout) // the late reply has arrived by now
	// The slow call ran when its commit command reached the server (the
	// proxy forwards at once and delays only the reply); a client may give
	// up before sending it.
	// The error is an unknown outcome unless the call knew that its commit
	// was never sent, and never will be.
	ran := c.counter("p20", l) - 1
	if c.spec.Commit != "" {
		sent := int64(p.Commands()[c.spec.Commit] - commits)
		if ran != sent {
			c.t.Errorf("property 20: the counter reads %d after the warm-up and the slow call, whose %s was forwarded %d times; want %d", ran+1, c.spec.Commit, sent, 1+sent)
		}
		if sent > 0 && !errors.Is(err, store.ErrUnknownOutcome) {
			c.t.Errorf("property 20: the slow call returned %v, not store.ErrUnknownOutcome, but its %s reached the server", err, c.spec.Commit)
		}
	} else if ran < 0 || ran > 1 {
		c.t.Errorf("property 20: the counter reads %d after the warm-up and the slow call, want 1 or 2", ran+1)
	} else if !errors.Is(err, store.ErrUnknownOutcome) {
		c.t.Errorf("property 20: a reply past the deadline returned %v; want an error wrapping store.ErrUnknownOutcome", err)
	}
	// The calls after it wait as long as they need: a stale reply is wrong
	// whenever it comes.
	for i := 0; i < 3; i++ {
		r, err, _ := c.timedAllow(healthy, "p20", l)
		// warm-up 1 + the slow call, if it ran, + i+1 calls since.
		if want := 100 - 2 - ran - int64(i); err != nil || !r.Allowed || r.Remaining != want {
			c.t.Errorf("property 20: call %d after the slow one = %+v, %v; want admitted with %d remaining (its own reply)", i, r, err, want)
		}
	}
}

// Property 21: Redis blackholed or down: every call returns within its
// timeout and follows the fail mode; service resumes within a second.
func checkRedisDown(c *checker) {
	p, st := c.proxied()
	l := limiter.PerHour(100)
	c.window(l)
	lim := c.limiter(st, limiter.WithTimeout(faultTimeout))
	open := c.limiter(st, limiter.WithTimeout(faultTimeout), limiter.WithFailMode(limiter.FailOpen))
	closed := c.limiter(st, limiter.WithTimeout(faultTimeout), limiter.WithFailMode(limiter.FailClosed))
	healthy := c.limiter(st, limiter.WithTimeout(healthyTimeout))
	if _, err := healthy.Allow(c.ctx, "p21", l); err != nil {
		c.t.Fatalf("property 21: warm-up: %v", err)
	}
	modes := func(state string) {
		for i, m := range []*limiter.Limiter{lim, open, closed} {
			r, err, took := c.timedAllow(m, "p21", l)
			if took > faultTimeout+faultMargin {
				c.t.Fatalf("property 21: %s: call took %s with a %s timeout (%+v, %v)", state, took, faultTimeout, r, err)
			}
			switch i {
			case 0:
				if err == nil {
					c.t.Errorf("property 21: %s: FailError returned %+v and no error", state, r)
				}
			case 1:
				if err != nil || !r.Allowed || !r.Degraded || r.Cause == nil {
					c.t.Errorf("property 21: %s: FailOpen = %+v, %v; want allowed, degraded, with a cause", state, r, err)
				}
			case 2:
				if err != nil || r.Allowed || !r.Degraded || r.Cause == nil {
					c.t.Errorf("property 21: %s: FailClosed = %+v, %v; want denied, degraded, with a cause", state, r, err)
				}
			}
		}
	}
	p.Blackhole(true)
	modes("blackholed")
	// AllowMany too: the Limiter's timeout bounds the whole batch, and
	// every ask is an error (a store's Batch that ignored its context
	// would hang here).
	start := time.Now()
	done := make(chan []limiter.Answer, 1)
	go func() {
		done <- lim.AllowMany(c.ctx, []limiter.Ask{{Key: "p21", Limits: []limiter.Limit{l}}, {Key: "p21-b", Limits: []limiter.Limit{l}}})
	}()
	select {
	case ans := <-done:
		if took := time.Since(start); took > faultTimeout+faultMargin {
			c.t.Errorf("property 21: blackholed: AllowMany took %s with a %s timeout", took, faultTimeout)
		}
		for i, a := range ans {
			if a.Err == nil {
				c.t.Errorf("property 21: blackholed: AllowMany's ask %d = %+v and no error", i, a.Result)
			}
		}
	case <-time.After(faultTimeout + faultMargin + faultWatchdog):
		c.t.Fatalf("property 21: blackholed: AllowMany had not returned %s after it was called with a %s timeout", time.Since(start).Round(time.Millisecond), faultTimeout)
	}
	p.Blackhole(false)
	// Service resumes within a second: a call started within a second of
	// the recovery succeeds. Calls get the time they need to dial.
	recovered := time.Now()
	for {
		started := time.Since(recovered)
		r, err, _ := c.timedAllow(healthy, "p21", l)
		if err == nil && r.Allowed {
			break
		}
		if started > time.Second {
			c.t.Errorf("property 21: service did not resume within 1s of recovery: %+v, %v", r, err)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = p.Close()
	modes("down")
}

// hostileSubjects are subjects that break naive Cluster key layouts.
var hostileSubjects = []string{"{", "}", "{}", "}{", "a{b}c", "a}b{c", "\r\n", "a\x00b", "🚦", "#", strings.Repeat("x", 1<<20)}

// Property 22: every key of a multi-limit decision has one hash slot, for
// any subject; on a Cluster the server agrees and no call hits CROSSSLOT.
func checkSameSlot(c *checker) {
	limits := []limiter.Limit{limiter.PerSecond(5), limiter.PerMinute(50), limiter.PerHour(500).Named("hourly")}
	c.window(limits...)
	for i, subject := range hostileSubjects {
		prefix := fmt.Sprintf("%s:%d", c.prefix, i)
		lim := c.limiter(nil, limiter.WithPrefix(prefix))
		c.window(limits...) // a subject's call and its SCAN in one window, when aligned
		var t0 time.Time
		if c.spec.Aligned && !c.h.Caps().VirtualClock {
			t0 = c.serverTime()
		}
		sent := time.Now()
		r, err := lim.Allow(c.ctx, subject, limits...)
		if err != nil || !r.Allowed {
			c.t.Errorf("property 22: subject %.12q: %+v, %v", subject, r, err)
			continue
		}
		var keys []string
		for _, k := range c.keys() {
			if strings.HasPrefix(k, prefix+":") {
				keys = append(keys, k)
			}
		}
		// An epoch-aligned strategy may hold a limit's previous window
		// beside the current one when the call met a window's edge: count
		// the limits that have keys. On a real clock a limit whose window
		// ended between the call and the SCAN (a slow machine) may have
		// none left, and counts as found.
		counted := len(keys)
		if c.spec.Aligned {
			var t1 time.Time
			if !t0.IsZero() {
				t1 = c.serverTime()
			}
			counted = 0
			for _, l := range limits {
				base, _ := limiter.Key(prefix, subject, l)
				ended := !t0.IsZero() && t0.UnixMilli()/l.Period.Milliseconds() != t1.UnixMilli()/l.Period.Milliseconds()
				if ended || slices.ContainsFunc(keys, func(k string) bool { return k == base || strings.HasPrefix(k, base+":") }) {
					counted++
				}
			}
		}
		// A refilling strategy's key expires when its limit is full
		// again: on a real clock, one unit back since the call (200 ms
		// for 5 per second, a slow machine's SCAN) may have taken it; a
		// key that outlives its window (a sliding window counter's, two
		// Periods) not before then.
		if !c.spec.Aligned && len(keys) < len(limits) && !c.h.Caps().VirtualClock {
			gone := 0
			for _, l := range limits {
				base, _ := limiter.Key(prefix, subject, l)
				lived := c.spec.KeyPeriods <= 1 || time.Since(sent) >= time.Duration(c.spec.KeyPeriods)*l.Period
				if !slices.Contains(keys, base) && c.refill(l, sent) >= 1 && lived {
					gone++
				}
			}
			counted = len(keys) + gone
		}
		if counted != len(limits) {
			c.t.Errorf("property 22: subject %.12q: %d keys for %d limits", subject, len(keys), len(limits))
		}
		slots := map[int64]bool{}
		var desc []string
		for _, k := range keys {
			n := c.slot(k)
			slots[n] = true
			desc = append(desc, fmt.Sprintf("%.40q in slot %d", k, n))
		}
		if len(slots) > 1 {
			c.t.Errorf("property 22: subject %.12q: the keys of one decision span %d slots: %s", subject, len(slots), strings.Join(desc, ", "))
		}
	}
}

// slot returns key's hash slot: the server's CLUSTER KEYSLOT on a Cluster,
// else the suite's own CRC16.
func (c *checker) slot(key string) int64 {
	c.t.Helper()
	if !c.h.Caps().Cluster {
		return int64(KeySlot(key))
	}
	r, err := c.do(store.Cmd{Name: "CLUSTER", Args: []any{"KEYSLOT", key}})
	if err == nil {
		err = r.Err
	}
	n, err2 := store.Int64(r.Val)
	if err != nil || err2 != nil {
		c.t.Fatalf("CLUSTER KEYSLOT: %v %v", err, err2)
	}
	if own := int64(KeySlot(key)); own != n {
		c.t.Errorf("property 22: CLUSTER KEYSLOT %.40q = %d, the suite computes %d", key, n, own)
	}
	return n
}

// KeySlot is Redis Cluster's HASH_SLOT (store.KeySlot). Property 22 uses
// it on servers without Cluster support, and checks it against CLUSTER
// KEYSLOT on a Cluster.
func KeySlot(key string) uint16 { return store.KeySlot(key) }

// Property 17: scripts are constants. After a warm-up, calls with distinct
// subjects and distinct limits never send a script's source again (EVAL,
// SCRIPT LOAD), seen by the fault proxy, which counts commands; and on a
// private real server or Cluster the script cache of every node holds as
// many scripts after them as before (INFO memory's number_of_cached_scripts).
func checkScriptsConstant(c *checker) {
	caps := c.h.Caps()
	if !caps.Proxy && !caps.Private {
		c.t.Skip("shared server without a fault proxy: neither the commands nor the script cache can be told apart from other clients'")
	}
	st := c.h.Store()
	var p *redistest.Proxy
	if caps.Proxy {
		p, st = c.proxied()
	}
	if caps.Private {
		for _, n := range c.h.Nodes() {
			if rs, err := n.Do(c.ctx, store.Cmd{Name: "SCRIPT", Args: []any{"FLUSH"}}); err != nil || rs[0].Err != nil {
				c.t.Fatalf("SCRIPT FLUSH: %v %v", err, rs)
			}
		}
	}
	lim := c.limiter(st)
	// Warm-up: one limit, subjects spread over every node of a Cluster.
	warm := limiter.Per(1000, time.Hour)
	c.window(warm)
	for i := range 50 {
		if _, err := lim.Allow(c.ctx, fmt.Sprintf("p17-warm-%d", i), warm); err != nil {
			c.t.Fatalf("property 17: warm-up call %d: %v", i, err)
		}
	}
	// the script cache is the suite's own only on a private server
	before, cached := c.cachedScripts()
	cached = cached && caps.Private
	if p != nil {
		p.ResetCounts()
	}
	// 1000 calls, a quarter under the race detector: a script that
	// changes with the limits shows at the first of them, and these are
	// calls one after another, which the race detector slows tenfold.
	calls := 1000
	if raceEnabled {
		calls = 250
	}
	c.window(limiter.Per(1, time.Duration(2000+calls)*time.Millisecond))
	for i := range calls {
		// A distinct subject, rate and window each call; windows of a few
		// seconds, so the keys go soon.
		l := limiter.Per(int64(1+i), time.Duration(2000+i)*time.Millisecond)
		if _, err := lim.Allow(c.ctx, fmt.Sprintf("p17-%d", i), l); err != nil {
			c.t.Fatalf("property 17: call %d: %v", i, err)
		}
	}
	if p != nil {
		counts := p.Commands()
		if len(counts) == 0 {
			c.t.Fatalf("property 17: the fault proxy forwarded no command of %d calls: does the Dialer connect to the address it is given?", calls)
		}
		if n := counts["EVAL"] + counts["EVAL_RO"] + counts["SCRIPT"] + counts["FUNCTION"]; n > 0 {
			c.t.Errorf("property 17: %d calls with distinct limits sent a script's source %d times (%v): the script changes with the limits",
				calls, n, counts)
		}
	}
	if after, _ := c.cachedScripts(); cached && !slices.Equal(before, after) {
		c.t.Errorf("property 17: the script cache of each node held %v scripts before %d calls with distinct limits and %v after: it grows with the limits",
			before, calls, after)
	}
}

// cachedScripts returns each node's number of cached scripts, and false
// when a node does not report it (miniredis).
func (c *checker) cachedScripts() ([]int64, bool) {
	var out []int64
	for _, n := range c.h.Nodes() {
		rs, err := n.Do(c.ctx, store.Cmd{Name: "INFO", Args: []any{"memory"}})
		if err != nil || rs[0].Err != nil {
			return nil, false
		}
		info, _ := rs[0].Val.(string)
		_, rest, ok := strings.Cut(info, "number_of_cached_scripts:")
		if !ok {
			return nil, false
		}
		line, _, _ := strings.Cut(rest, "\n")
		v, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
		if err != nil {
			return nil, false
		}
		out = append(out, v)
	}
	return out, len(out) > 0
}
