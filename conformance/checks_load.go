package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// readCommands are commands that read a key: queued between MULTI and EXEC
// they return QUEUED, never the value.
var readCommands = map[string]bool{
	"GET": true, "MGET": true, "PTTL": true, "TTL": true, "EXISTS": true, "STRLEN": true,
	"GETRANGE": true, "TYPE": true, "PEXPIRETIME": true, "EXPIRETIME": true,
	"HGET": true, "HMGET": true, "HGETALL": true, "ZSCORE": true, "ZCARD": true, "LLEN": true, "SCARD": true,
}

// txRecorder wraps a store and records how a strategy uses transactions.
// Violations: a transaction (a MULTI ... EXEC in a Do pipeline, or a
// Tx.Exec) that reads a key and writes it too, so the write was decided
// without the value (the read only returns QUEUED); an EXEC on a pinned
// connection that read nothing first. A transaction that only reads (a
// snapshot whose values come back in EXEC's reply) is fine.
type txRecorder struct {
	store.Store
	execs atomic.Int64

	mu         sync.Mutex
	violations map[string]int
}

func newTxRecorder(st store.Store) *txRecorder {
	return &txRecorder{Store: st, violations: map[string]int{}}
}

func (r *txRecorder) violate(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violations[fmt.Sprintf(format, args...)]++
}

func (r *txRecorder) report() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, v := range slices.Sorted(maps.Keys(r.violations)) {
		out = append(out, fmt.Sprintf("%s (%d times)", v, r.violations[v]))
	}
	return out
}

// store returns r as a store.Store, with a Watcher and a
// store.Int64sEvaler when the wrapped store has them (so that a strategy
// takes the path it takes in production; integer scripts run no
// transaction to record).
func (r *txRecorder) store() store.Store {
	w, isW := r.Store.(store.Watcher)
	ev, isEv := r.Store.(store.Int64sEvaler)
	switch {
	case isW && isEv:
		return struct {
			recWatcher
			store.Int64sEvaler
		}{recWatcher{r, w}, ev}
	case isW:
		return recWatcher{r, w}
	case isEv:
		return struct {
			*txRecorder
			store.Int64sEvaler
		}{r, ev}
	}
	return r
}

func (r *txRecorder) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	start := -1
	for i, c := range cmds {
		switch strings.ToUpper(c.Name) {
		case "MULTI":
			start = i
		case "EXEC", "DISCARD":
			if start >= 0 {
				r.checkTx(cmds[start+1 : i])
			}
			start = -1
			r.execs.Add(1)
		}
	}
	return r.Store.Do(ctx, cmds...)
}

// checkTx flags a transaction that reads a key it also writes.
func (r *txRecorder) checkTx(cmds []store.Cmd) {
	reads, writes := map[string]string{}, map[string]bool{}
	for _, c := range cmds {
		if len(c.Args) == 0 {
			continue
		}
		k, ok := c.Args[0].(string)
		if !ok {
			continue
		}
		if name := strings.ToUpper(c.Name); readCommands[name] {
			reads[k] = name
		} else {
			writes[k] = true
		}
	}
	for k, name := range reads {
		if writes[k] {
			r.violate("%s of a key the same transaction writes: inside MULTI it returns QUEUED, so the write was decided without the value", name)
		}
	}
}

type recWatcher struct {
	*txRecorder
	w store.Watcher
}

func (r recWatcher) Watch(ctx context.Context, keys []string, fn func(store.Tx) error) error {
	return r.w.Watch(ctx, keys, func(tx store.Tx) error { return fn(&recTx{Tx: tx, r: r.txRecorder}) })
}

// recTx is one pinned connection; used by one goroutine at a time.
type recTx struct {
	store.Tx
	r     *txRecorder
	reads int
}

func (t *recTx) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	for _, c := range cmds {
		if readCommands[strings.ToUpper(c.Name)] {
			t.reads++
		}
	}
	return t.Tx.Do(ctx, cmds...)
}

func (t *recTx) Exec(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	t.r.checkTx(cmds)
	if t.reads == 0 {
		t.r.violate("EXEC on a watched connection that read nothing before it")
	}
	t.r.execs.Add(1)
	return t.Tx.Exec(ctx, cmds...)
}

// Property 5: optimistic contention. With a retry bound of one attempt,
// admitted <= L and admitted + denied + contention errors == attempts;
// with a large bound, exactly L. Reads run on the pinned connection before
// MULTI, never between MULTI and EXEC. A strategy that declares no
// optimistic retries never reports contention.
func checkOptimisticContention(c *checker) {
	const g, m, rate = 40, 10, 100
	l := limiter.PerHour(rate)
	c.window(l)
	type run struct {
		name     string
		s        limiter.Strategy
		attempts int
	}
	runs := []run{{"the spec's strategy", c.spec.Strategy, 0}}
	if c.spec.Optimistic != nil {
		runs = []run{{"retry bound 1", c.spec.Optimistic(1), 1}, {"retry bound 4096", c.spec.Optimistic(1 << 12), 1 << 12}}
	}
	for i, ru := range runs {
		rec := newTxRecorder(c.h.Store())
		lim := c.limiterOf(rec.store(), ru.s)
		subject := fmt.Sprintf("p5-%d", i)
		start := time.Now()
		a, d, errs := hammer(g, m, func(int, int) (limiter.Result, error) {
			return c.underLoad(func(ctx context.Context) (limiter.Result, error) { return lim.Allow(ctx, subject, l) })
		})
		var contention int64
		var other []error
		for _, e := range errs {
			if errors.Is(e, limiter.ErrContention) && c.spec.Optimistic != nil {
				contention++
			} else {
				other = append(other, e)
			}
		}
		unknown := c.unknownOutcomes("property 5: "+ru.name, g*m, other)
		if a+d+contention+int64(len(other)) != g*m {
			c.t.Errorf("property 5: %s: %d admitted + %d denied + %d contention errors + %d other errors != %d calls", ru.name, a, d, contention, len(other), g*m)
		}
		exact := c.spec.Exact && ru.attempts != 1
		rf := c.refill(l, start)
		if a > rate+rf || (exact && a+unknown < rate) {
			c.t.Errorf("property 5: %s: admitted %d (and %d calls whose outcome is unknown) of %d with limit %d (%d refilled while they ran), want %s %d", ru.name, a, unknown, g*m, rate, rf, map[bool]string{true: "exactly", false: "at most"}[exact], rate)
		}
		if ru.attempts > 1 && contention > 0 {
			c.t.Errorf("property 5: %s: %d contention errors with %d attempts per decision", ru.name, contention, ru.attempts)
		}
		if c.spec.Counter && !c.spec.DeniedConsume {
			if n := c.counter(subject, l); n < a || n > a+unknown {
				c.t.Errorf("property 5: %s: server counter %d, %d admitted and %d calls whose outcome is unknown: want the counter in [%d, %d]", ru.name, n, a, unknown, a, a+unknown)
			}
		}
		// The read-only paths go through the recorder too.
		if r, err := lim.Peek(c.ctx, subject, l); err != nil || r.Remaining > max(rate-a, 0)+c.refill(l, start) || r.Remaining < max(rate-a-unknown, 0) {
			c.t.Errorf("property 5: %s: Peek = %+v, %v; want %d remaining (%d with the calls whose outcome is unknown, %d more with what came back)", ru.name, r, err, max(rate-a, 0), max(rate-a-unknown, 0), c.refill(l, start))
		}
		if r, err := lim.AllowN(c.ctx, subject, rate+1, l); err != nil || r.Allowed {
			c.t.Errorf("property 5: %s: a cost above the limit = %+v, %v; want denied", ru.name, r, err)
		}
		for _, v := range rec.report() {
			c.t.Errorf("property 5: %s: %s", ru.name, v)
		}
		if a > 0 && rec.execs.Load() == 0 && c.spec.Optimistic != nil {
			c.t.Errorf("property 5: %s: %d admitted without a single EXEC", ru.name, a)
		}
		c.t.Logf("property 5: %s: %d admitted, %d denied, %d contention errors", ru.name, a, d, contention)
	}
}

// Property 7: leak under load. 5ms windows, many goroutines over a few
// keys, while the keys' PTTL is sampled continuously: never -1. On a
// virtual clock a goroutine advances it 1ms at a time, so keys expire
// between any two commands, as they do on a real server.
func checkLeakUnderLoad(c *checker) {
	virtual := c.h.Caps().VirtualClock
	l := limiter.Per(3, 5*time.Millisecond)
	c.window(l)
	// On a virtual clock time only moves when the suite moves it: the
	// clock then advances 1ms at a time right after some decision's first
	// round trip (between a read and a write, where time passes under load
	// on a real server), or on its own when no call took the step.
	hs := newHookStore(c.h.Store())
	lim := c.limiter(nil)
	// advanced is how far the virtual clock has moved; a strategy that
	// reads the app clock (Spec.Clocked) reads the virtual one, which runs
	// ahead of the real one when calls are slow (a busy machine).
	var advanced atomic.Int64
	if virtual {
		lim = c.limiter(hs.store())
		if c.spec.Clocked != nil {
			base := c.serverTime()
			lim = c.limiterOf(hs.store(), c.spec.Clocked(func() time.Time { return base.Add(time.Duration(advanced.Load())) }))
		}
	}
	const workers, subjects = 8, 4
	calls, dur := 100000, 300*time.Millisecond
	if !virtual {
		calls, dur = 5000, 1500*time.Millisecond
	}
	var (
		wg                 sync.WaitGroup
		done               atomic.Bool
		admitted, decided  atomic.Int64
		mu                 sync.Mutex
		errs               []error
		contention         int
		perSubjectAdmitted [subjects]atomic.Int64
		// decisions with a Cause (a denial because the round trip
		// outlasted the window: ErrStaleWindow), which say nothing of
		// the subject's quota, and the others
		perSubjectCaused, perSubjectPlain [subjects]atomic.Int64
	)
	// The load lasts dur, and longer (at most 5s more) until the sampler
	// has swept the keys minSamples times: on a busy machine it may get
	// little time beside the workers.
	const minSamples = 5
	var sweeps atomic.Int64
	deadline := time.Now().Add(dur)
	hardStop := deadline.Add(5 * time.Second)
	going := func() bool {
		now := time.Now()
		return now.Before(deadline) || (sweeps.Load() < minSamples && now.Before(hardStop))
	}
	for w := range workers {
		wg.Go(func() {
			for i := 0; i < calls && going(); i++ {
				s := (w + i) % subjects
				r, err := lim.Allow(c.ctx, fmt.Sprintf("p7-%d", s), l)
				switch {
				case err != nil && errors.Is(err, limiter.ErrContention) && c.spec.Optimistic != nil:
					mu.Lock()
					contention++
					mu.Unlock()
				case err != nil:
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				case r.Allowed:
					admitted.Add(1)
					perSubjectAdmitted[s].Add(1)
					perSubjectPlain[s].Add(1)
					decided.Add(1)
				case r.Cause != nil:
					perSubjectCaused[s].Add(1)
					decided.Add(1)
				default:
					perSubjectPlain[s].Add(1)
					decided.Add(1)
				}
			}
		})
	}
	var adv sync.WaitGroup
	if virtual {
		adv.Go(func() {
			// The clock moves 1 ms per 100 µs, but only while decisions are
			// made: on a busy machine, where a call takes longer, a window
			// still holds some calls.
			var last int64
			for !done.Load() {
				d := decided.Load()
				if d == last {
					time.Sleep(100 * time.Microsecond)
					continue
				}
				last = d
				step := func() {
					c.h.Advance(time.Millisecond)
					advanced.Add(int64(time.Millisecond))
				}
				if prev := hs.hook.Swap(&step); prev != nil {
					(*prev)() // no call took the last step: take it here
				}
				time.Sleep(100 * time.Microsecond)
			}
		})
	}
	go func() {
		wg.Wait()
		done.Store(true)
	}()
	immortal := map[string]bool{}
	sample := func() {
		for _, k := range c.keys() {
			if c.pttl(k) == -1 {
				immortal[k] = true
			}
		}
		sweeps.Add(1)
	}
	for !done.Load() {
		sample()
	}
	samples := sweeps.Load() // the sweeps made during the load
	adv.Wait()
	sample()
	if len(immortal) > 0 {
		c.t.Errorf("property 7: keys seen without a TTL under load: %q", slices.Sorted(maps.Keys(immortal)))
	}
	if len(errs) > 0 {
		c.t.Errorf("property 7: %d calls failed%s", len(errs), firstErrs(errs))
	}
	caused := int64(0)
	for s := range perSubjectAdmitted {
		caused += perSubjectCaused[s].Load()
		// On a machine so busy that a round trip outlasts a 5 ms window,
		// a strategy that will not count in a window that is over denies
		// with a Cause (Bucketed: ErrStaleWindow), which says nothing of
		// the quota: a subject is judged on its other decisions.
		if perSubjectAdmitted[s].Load() == 0 && perSubjectPlain[s].Load() > 0 {
			c.t.Errorf("property 7: subject %d: nothing admitted in %d decisions over many 5ms windows (and %d denials with a Cause)", s, perSubjectPlain[s].Load(), perSubjectCaused[s].Load())
		}
	}
	if caused > 0 {
		c.t.Logf("property 7: %d denials with a Cause (round trips longer than the window, on a busy machine)", caused)
	}
	if samples < minSamples {
		c.t.Errorf("property 7: only %d PTTL samples during the load", samples)
	}
	c.t.Logf("property 7: %d decisions (%d admitted, %d contention errors), %d PTTL sweeps", decided.Load(), admitted.Load(), contention, samples)
}

// setupCommands are the connection set-up commands the fault proxy does not
// count as a decision's commands (its "" match skips them too).
var setupCommands = map[string]bool{"HELLO": true, "AUTH": true, "CLIENT": true, "SELECT": true, "READONLY": true, "PING": true}

// Property 8: crash between commands. A proxy cuts a fresh connection
// before each command of a decision in turn (an admitted one on a new key,
// then, for a strategy whose denials write, a denied one on a full key): no
// key is left without a TTL, a cut
// before the commit command changes no counter, an admission that was
// reported was counted, and the next call through the same store works.
func checkCrashBetweenCommands(c *checker) {
	const rate = 3
	l := limiter.PerHour(rate)
	c.window(l)
	direct := c.limiter(nil)
	// Scripts are loaded through a direct connection first, so that the
	// proxied decisions run the same commands every time.
	if _, err := direct.Allow(c.ctx, "p8-warm", l); err != nil {
		c.t.Fatalf("property 8: warm-up: %v", err)
	}
	paths := []string{"admitted"}
	if c.spec.Compensates || c.spec.DeniedConsume {
		// A denial that writes nothing has nothing to leave behind.
		paths = append(paths, "denied")
	}
	for _, path := range paths {
		prepare := func(subject string) int64 {
			if path == "admitted" {
				return 0
			}
			if _, err := direct.AllowN(c.ctx, subject, rate, l); err != nil {
				c.t.Fatalf("property 8: filling %s: %v", subject, err)
			}
			return rate
		}
		// Count the commands of one decision on a fresh store.
		subject := "p8-" + path + "-count"
		prepare(subject)
		p, st := c.proxied()
		if _, err := c.limiter(st).Allow(c.ctx, subject, l); err != nil {
			c.t.Fatalf("property 8: %s decision without faults: %v", path, err)
		}
		n := forwarded(p)
		if n == 0 {
			c.t.Fatalf("property 8: the fault proxy forwarded no command of a %s decision: does the Dialer connect to the address it is given?", path)
		}
		c.t.Logf("property 8: a fresh %s decision sends %d commands: %v", path, n, p.Commands())
		for cut, redone := 0, 0; cut < n; cut++ {
			// A cut whose calls straddle the end of an epoch-aligned
			// window (a loaded machine took seconds) is made again on a
			// new subject: the call after it counts in a new window.
			if problems, rolled := c.crashCut(path, cut, redone, l, prepare); rolled && redone < 3 {
				c.t.Logf("property 8: %s decision cut after %d commands: the window ended meanwhile; made again", path, cut)
				redone++
				cut--
			} else {
				for _, m := range problems {
					c.t.Error(m)
				}
			}
		}
	}
}

// crashCut is one cut of property 8: a decision (path) whose connection a
// proxy cuts before its command cut, then the call after it. It returns
// what went wrong, and whether an epoch-aligned window of l ended between
// the first call and the last (rolled), which voids the counts.
func (c *checker) crashCut(path string, cut, redone int, l limiter.Limit, prepare func(string) int64) (problems []string, rolled bool) {
	const rate = 3
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	c.window(l)
	start := c.serverTime()
	defer func() {
		p := l.Period.Milliseconds()
		rolled = c.spec.Aligned && !c.h.Caps().VirtualClock && c.serverTime().UnixMilli()/p != start.UnixMilli()/p
	}()
	subject := fmt.Sprintf("p8-%s-%d", path, cut)
	if redone > 0 {
		subject = fmt.Sprintf("p8-%s-%d-again%d", path, cut, redone)
	}
	before := prepare(subject)
	p, st := c.proxied()
	// A deadline: a client may wait for its own timeouts on a
	// connection cut mid-handshake; the property is about state.
	lim := c.limiter(st, limiter.WithTimeout(time.Second))
	p.CutBefore("", cut)
	r, err := lim.Allow(c.ctx, subject, l)
	if p.Disarm() {
		// The call ended (its deadline, on a slow machine)
		// before the command to cut: the checks below still
		// hold, and the call after it must meet no fault.
		c.t.Logf("property 8: %s decision to cut after %d commands ended after %d, before the cut: %+v, %v", path, cut, forwarded(p), r, err)
	}
	committed := p.Commands()[c.spec.Commit] > 0
	for _, k := range c.keys() {
		if strings.Contains(k, "{"+subject+"}") && c.pttl(k) == -1 {
			fail("property 8: %s decision cut after %d commands left %q without a TTL", path, cut, k)
		}
	}
	after := c.counter(subject, l)
	switch {
	case c.spec.Commit != "" && !committed && after != before:
		fail("property 8: %s decision cut after %d commands, before %s: the counter moved from %d to %d (a cut transaction must change nothing)", path, cut, c.spec.Commit, before, after)
	case err == nil && r.Allowed && after != before+1:
		fail("property 8: %s decision cut after %d commands was reported admitted, but the counter moved from %d to %d", path, cut, before, after)
	case after != before && after != before+1:
		fail("property 8: %s decision cut after %d commands moved the counter from %d to %d", path, cut, before, after)
	}
	// The call after the cut meets no fault: a deadline that fits
	// a busy machine (one second was seen to end an Optimistic
	// decision's four round trips under the race detector).
	again := c.limiter(st, limiter.WithTimeout(5*time.Second))
	next, err := c.unsentAgain(fmt.Sprintf("property 8: the call after a cut after %d commands", cut), p, func() (limiter.Result, error) {
		return again.Allow(c.ctx, subject, l)
	})
	switch {
	case err != nil:
		fail("property 8: the call after a cut after %d commands: %v", cut, err)
	case path == "admitted" && (!next.Allowed || next.Remaining != rate-after-1):
		fail("property 8: the call after a cut after %d commands = %+v; want admitted with %d remaining", cut, next, rate-after-1)
	case path == "denied" && next.Allowed:
		fail("property 8: the call after a cut after %d commands on a full key was admitted", cut)
	}
	return problems, false
}
