package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// Check is one property of the suite, with its number.
type Check struct {
	// ID is the property's number, as the README's table of properties
	// lists it.
	ID int
	// Name is a short slug, used as the subtest name.
	Name string
	run  func(c *checker)
	// leases: a check of a Leaser, run for the Specs that have one
	// instead of the strategy checks.
	leases bool
}

// For reports whether ch checks what s is: a Leaser's checks for a Spec
// with a Leaser, the strategy checks for the others.
func (ch Check) For(s Spec) bool { return ch.leases == (s.Leaser != nil) }

// alone reports whether check id measures the whole process on a backend
// with caps, so that no other check may run beside it when checks run in
// parallel (t.Parallel): on a real clock 9 times its calls against the
// window's ticks and 25 measures the live heap (neither does on a virtual
// clock); 27 moves even a virtual clock with the real one, and 14 changes
// time.Local, which every goroutine that formats a time reads (a client's
// logger among them). On a Cluster, which the checks share, 17 counts the
// scripts in each node's cache, which another check's first call adds to.
func alone(id int, caps Caps) bool {
	switch id {
	case 9, 25:
		return !caps.VirtualClock
	case 17:
		return caps.Cluster
	case 14:
		return caps.VirtualClock // it skips on a real clock
	case 27:
		return true
	}
	return false
}

// Checks returns every check of the suite, in test-plan order.
func Checks() []Check {
	return []Check{
		{ID: 1, Name: "exact-admission", run: checkExactAdmission},
		{ID: 2, Name: "weighted-costs", run: checkWeightedCosts},
		{ID: 3, Name: "hostile-costs", run: checkHostileCosts},
		{ID: 4, Name: "multi-rule-all-or-nothing", run: checkMultiRule},
		{ID: 5, Name: "optimistic-contention", run: checkOptimisticContention},
		{ID: 6, Name: "forced-leak", run: checkForcedLeak},
		{ID: 7, Name: "leak-under-load", run: checkLeakUnderLoad},
		{ID: 8, Name: "crash-between-commands", run: checkCrashBetweenCommands},
		{ID: 9, Name: "window-never-slides", run: checkNeverSlides},
		{ID: 10, Name: "short-and-long-windows", run: checkWindowLengths},
		{ID: 11, Name: "self-repair", run: checkSelfRepair},
		{ID: 12, Name: "bounded-ttls", run: checkBoundedTTLs},
		{ID: 13, Name: "app-clock-skew", run: checkClockSkew},
		{ID: 14, Name: "epoch-not-time-zones", run: checkTimeZones},
		{ID: 15, Name: "boundary-bursts", run: checkBoundaryBursts},
		{ID: 16, Name: "noscript-invisible", run: checkNoScript},
		{ID: 17, Name: "scripts-are-constants", run: checkScriptsConstant},
		{ID: 18, Name: "server-conditions", run: checkServerConditions},
		{ID: 19, Name: "lost-reply-counted-once", run: checkLostReply},
		{ID: 20, Name: "slow-reply-past-deadline", run: checkSlowReply},
		{ID: 21, Name: "redis-down-or-blackholed", run: checkRedisDown},
		{ID: 22, Name: "same-slot-for-hostile-subjects", run: checkSameSlot},
		{ID: 25, Name: "cardinality-bounded", run: checkCardinality},
		{ID: 26, Name: "no-accidental-fail-open", run: checkNoAccidentalFailOpen},
		{ID: 27, Name: "replies-slower-than-window", run: checkSlowerThanWindow},
		{ID: 28, Name: "cancel-between-round-trips", run: checkCancelBetweenRoundTrips},
		{ID: 29, Name: "corrupt-counter", run: checkCorruptCounter},
		{ID: 30, Name: "period-change", run: checkPeriodChange},
		{ID: 31, Name: "denials-bind", run: checkDenialsBind},
		{ID: 32, Name: "contention-never-admits", run: checkContentionNeverAdmits},
		{ID: 35, Name: "retry-after-honoured", run: checkRetryHonoured},
		{ID: 40, Name: "allow-many-exact", run: checkAllowMany},
		{ID: 41, Name: "refill-exact", run: checkRefillExact},
		{ID: 42, Name: "lease-return-own-window", run: checkLeaseReturn},
		{ID: 44, Name: "window-quota-reset", run: checkWindowQuotaReset},
		{ID: 45, Name: "expire-deletes-at-once", run: checkExpireDeletesAtOnce},
		{ID: 47, Name: "reset-forgets-every-limit", run: checkReset},
		{ID: 48, Name: "refill-model", run: checkRefillModel},
		{ID: 36, Name: "leases-exact", run: checkLeasesExact, leases: true},
		{ID: 37, Name: "crashed-holder-frees-slot", run: checkCrashedHolder, leases: true},
		{ID: 38, Name: "release-frees-own-slot", run: checkReleaseHarmless, leases: true},
		{ID: 39, Name: "retried-lease-holds-one", run: checkLeaseRetry, leases: true},
		{ID: 43, Name: "late-acquire-abandoned", run: checkLateAcquireAbandoned, leases: true},
		{ID: 46, Name: "lease-expire-deletes-at-once", run: checkLeaseExpireDeletesAtOnce, leases: true},
		{ID: 49, Name: "mixed-limit-leases", run: checkMixedLimitLeases, leases: true},
		{ID: 50, Name: "lost-lease-reply-frees-slot", run: checkLeaseLostReply, leases: true},
	}
}

// quiet is held for reading by every check that runs and for writing by
// one that must run alone.
var quiet sync.RWMutex

// hold takes quiet for a check and returns its release, which does
// nothing after the first call.
func hold(alone bool) func() {
	if alone {
		quiet.Lock()
		return sync.OnceFunc(quiet.Unlock)
	}
	quiet.RLock()
	return sync.OnceFunc(quiet.RUnlock)
}

// CheckByName returns the check named name.
func CheckByName(name string) (Check, bool) {
	for _, c := range Checks() {
		if c.Name == name {
			return c, true
		}
	}
	return Check{}, false
}

// RunStrategyTests runs every check against each spec on stores made by mk,
// one subtest per spec and check. The specs' subtests run in parallel (as
// go test's -parallel allows), each spec's checks one after another: every
// check has a server, or keys, of its own, and the checks that measure the
// whole process run alone.
func RunStrategyTests(t *testing.T, mk HarnessMaker, specs ...Spec) {
	t.Helper()
	for _, spec := range specs {
		t.Run(spec.Name, func(t *testing.T) {
			t.Parallel()
			for _, ch := range Checks() {
				if !ch.For(spec) {
					continue
				}
				t.Run(fmt.Sprintf("P%02d-%s", ch.ID, ch.Name), func(t *testing.T) {
					RunCheck(t, mk, spec, ch)
				})
			}
		})
	}
}

// RunStoreTests proves a store adapter: the store contract checks, then
// every check with every strategy this module ships.
func RunStoreTests(t *testing.T, mk HarnessMaker) {
	t.Helper()
	t.Run("store", func(t *testing.T) {
		for _, sc := range StoreChecks() {
			t.Run(sc.Name, func(t *testing.T) { RunStoreCheck(t, mk, sc) })
		}
	})
	RunStrategyTests(t, mk, Strategies()...)
}

// RunCheck runs one check of spec on a fresh harness from mk, then sweeps
// the check's keys for missing or excessive TTLs (property 12).
func RunCheck(t testing.TB, mk HarnessMaker, spec Spec, ch Check) {
	t.Helper()
	c := newChecker(t, mk, spec)
	release := hold(alone(ch.ID, c.h.Caps()))
	defer release()
	if r, ok := t.(*recorder); ok {
		r.onAbandon(release) // a check left running must not hold the others
	}
	if !c.h.Caps().Private {
		t.Cleanup(c.deleteKeys)
	}
	ch.run(c)
	if !t.Failed() {
		c.assertNoImmortalKeys(spec.life(c.maxWindow) + time.Second)
	}
}

// deleteKeys removes the check's keys from a shared server.
func (c *checker) deleteKeys() {
	for _, k := range c.keys() {
		_, _ = c.do(store.Cmd{Name: "DEL", Args: []any{k}})
	}
}

func newChecker(t testing.TB, mk HarnessMaker, spec Spec) *checker {
	t.Helper()
	ctx := context.Background()
	h, err := mk(ctx, t)
	if err != nil {
		t.Fatalf("make harness: %v", err)
	}
	t.Cleanup(h.Close)
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &checker{t: t, ctx: ctx, h: h, spec: spec, prefix: "ct" + hex.EncodeToString(b[:])}
}

// checker carries one check's state.
type checker struct {
	t         testing.TB
	ctx       context.Context
	h         Harness
	spec      Spec
	prefix    string
	maxWindow time.Duration
	slowest   atomic.Int64 // the slowest call made underLoad, in ns
}

// limiter returns a Limiter of the spec's strategy on st (the harness's
// store when nil), under the check's prefix.
func (c *checker) limiter(st store.Store, opts ...limiter.Option) *limiter.Limiter {
	c.t.Helper()
	return c.limiterOf(st, c.spec.Strategy, opts...)
}

// limiterOf is limiter with another strategy than the spec's (the spec's
// strategy on another clock, or with another retry bound), still with the
// spec's Options.
func (c *checker) limiterOf(st store.Store, s limiter.Strategy, opts ...limiter.Option) *limiter.Limiter {
	c.t.Helper()
	if st == nil {
		st = c.h.Store()
	}
	all := append([]limiter.Option{limiter.WithPrefix(c.prefix)}, c.spec.Options...)
	l, err := limiter.New(st, s, append(all, opts...)...)
	if err != nil {
		c.t.Fatalf("limiter.New: %v", err)
	}
	return l
}

// window records a window length used, for the final TTL sweep. For an
// epoch-aligned strategy on a real clock it also waits, when the current
// window of a limit is about to end, for the next one, so that a check's
// calls fall in one window (on a virtual clock time only moves with Advance).
func (c *checker) window(ls ...limiter.Limit) {
	for _, l := range ls {
		c.maxWindow = max(c.maxWindow, l.Period)
	}
	if !c.spec.Aligned || c.h.Caps().VirtualClock {
		return
	}
	for range 3 {
		wait := time.Duration(0)
		now := c.serverTime()
		for _, l := range ls {
			left := l.Period - time.Duration(now.UnixMilli()%l.Period.Milliseconds())*time.Millisecond
			if left < min(l.Period/2, 5*time.Second) {
				wait = max(wait, left+5*time.Millisecond)
			}
		}
		if wait == 0 {
			return
		}
		time.Sleep(wait)
	}
}

// refill is what a refilling strategy may have got back for l since start;
// nothing on a virtual clock, which moves only with Advance.
func (c *checker) refill(l limiter.Limit, start time.Time) int64 {
	if c.h.Caps().VirtualClock {
		return 0
	}
	return c.spec.refilled(l, time.Since(start))
}

// serverTime returns the backend's clock (TIME).
func (c *checker) serverTime() time.Time {
	c.t.Helper()
	r, err := c.do(store.Cmd{Name: "TIME"})
	if err == nil {
		err = r.Err
	}
	var sec, usec int64
	arr, err2 := store.Slice(r.Val)
	if err == nil && err2 == nil && len(arr) == 2 {
		sec, err = store.Int64(arr[0])
		if err == nil {
			usec, err = store.Int64(arr[1])
		}
	} else if err == nil {
		err = fmt.Errorf("reply %v: %v", r.Val, err2)
	}
	if err != nil {
		c.t.Fatalf("TIME: %v", err)
	}
	return time.Unix(sec, usec*1000)
}

// expireTime returns key's expiry as the server keeps it, in Unix
// milliseconds, as the interval [lo, hi] that holds it, and true: read
// with PEXPIRETIME (lo = hi), or, where the server refuses it (before
// Redis 7.0), from its clock before and after the key's PTTL in one script
// (expireTimeScript: a millisecond or two wide, wider when the server was
// descheduled in between, never wrong); 0, 0 and false when the server
// refuses both (an ACL) or the key has no expiry.
func (c *checker) expireTime(key string) (lo, hi int64, ok bool) {
	c.t.Helper()
	r, err := c.do(store.Cmd{Name: "PEXPIRETIME", Args: []any{key}})
	if err != nil {
		c.t.Fatalf("PEXPIRETIME %s: %v", key, err)
	}
	if r.Err == nil {
		at, err := store.Int64(r.Val)
		return at, at, err == nil && at > 0
	}
	v, err := expireTimeScript.Run(c.ctx, c.h.Store(), []string{key}, nil)
	if err != nil {
		return 0, 0, false
	}
	xs, err := store.Int64s(v)
	if err != nil || len(xs) != 5 || xs[2] < 0 {
		return 0, 0, false
	}
	before, after := xs[0]*1000+xs[1]/1000, xs[3]*1000+xs[4]/1000
	return before + xs[2] - 1, after + xs[2], true
}

// alignTo moves the backend's clock (Advance; on a real server, waits)
// until it is offset into an epoch-aligned window of length period.
func (c *checker) alignTo(period, offset time.Duration) {
	c.t.Helper()
	us, p := c.serverTime().UnixMicro(), period.Microseconds()
	d := (offset.Microseconds() - us%p + p) % p
	c.h.Advance(time.Duration(d) * time.Microsecond)
}

// subjectKeys returns the keys of subject whose counter is not zero (an
// epoch-aligned strategy may leave a window's key at 0 after taking a
// request back), sorted.
func (c *checker) subjectKeys(subject string) []string {
	c.t.Helper()
	var out []string
	for _, k := range c.keys() {
		if !strings.Contains(k, "{"+subject+"}") {
			continue
		}
		r, err := c.do(store.Cmd{Name: "GET", Args: []any{k}})
		if err != nil {
			c.t.Fatalf("GET %s: %v", k, err)
		}
		if v, _ := store.String(r.Val); v == "0" || errors.Is(r.Err, store.ErrNil) {
			continue
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// windowPrefix is what the names of subject's window counters for l start
// with, the window's index following it (Aligned specs).
func (c *checker) windowPrefix(subject string, l limiter.Limit) string {
	c.t.Helper()
	base, err := limiter.Key(c.prefix, subject, l)
	if err != nil {
		c.t.Fatalf("key: %v", err)
	}
	if c.spec.WindowKey == nil {
		return base + ":"
	}
	return strings.TrimSuffix(c.spec.WindowKey(base, l.Period, 0), "0")
}

// laterWindow reports whether key is subject's key for l in an
// epoch-aligned window after window cur (for Aligned specs, whose keys end
// in the window's index: windowPrefix). A strategy that picks its window by the app
// clock and checks it against the server's TIME (Bucketed) may count a
// call that races a window's end in the next window's key and take it
// back, leaving that key at 0 with the next window's expiry: it admits
// nothing. The checks that look for the current window's key skip such
// keys when they hold nothing (emptyCounter).
func (c *checker) laterWindow(key, subject string, l limiter.Limit, cur int64) bool {
	n, ok := c.windowIndex(key, subject, l)
	return ok && n > cur
}

// earlierWindow reports whether key is subject's counter of l for a window
// before cur (epoch-aligned specs only).
func (c *checker) earlierWindow(key, subject string, l limiter.Limit, cur int64) bool {
	n, ok := c.windowIndex(key, subject, l)
	return ok && n < cur
}

// windowIndex returns the window index that key, subject's counter of l,
// names (epoch-aligned specs only).
func (c *checker) windowIndex(key, subject string, l limiter.Limit) (int64, bool) {
	if !c.spec.Aligned {
		return 0, false
	}
	idx, ok := strings.CutPrefix(key, c.windowPrefix(subject, l))
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(idx, 10, 64)
	return n, err == nil
}

// emptyCounter reports whether key holds a counter of l at 0
// (CountsDownFrom when the spec counts down); false for a key that is not
// a counter.
func (c *checker) emptyCounter(key string, l limiter.Limit) bool {
	c.t.Helper()
	r, err := c.do(store.Cmd{Name: "GET", Args: []any{key}})
	if err != nil || r.Err != nil {
		return false
	}
	n, err := store.Int64(r.Val)
	if c.spec.CountsDownFrom != 0 {
		return err == nil && n == c.spec.CountsDownFrom
	}
	return err == nil && n == 0
}

// counter returns how much of l is consumed for subject, read from the
// server: the raw counter when the spec declares one, else through Peek.
func (c *checker) counter(subject string, l limiter.Limit) int64 {
	c.t.Helper()
	if c.spec.Counter && c.spec.Aligned {
		// one counter per window, named by its index: all of them
		prefix := c.windowPrefix(subject, l)
		var sum int64
		for _, k := range c.keys() {
			if idx, ok := strings.CutPrefix(k, prefix); ok && idx != "" && strings.Trim(idx, "0123456789") == "" {
				sum += c.countOf(k, l)
			}
		}
		return sum
	}
	if c.spec.Counter {
		key, err := limiter.Key(c.prefix, subject, l)
		if err != nil {
			c.t.Fatalf("key: %v", err)
		}
		return c.countOf(key, l)
	}
	res, err := c.limiter(nil).Peek(c.ctx, subject, l)
	if err != nil {
		c.t.Fatalf("Peek: %v", err)
	}
	return l.Rate - res.Remaining
}

// countOf reads the count of l at key (0 when there is none), as the
// spec's counters hold it.
func (c *checker) countOf(key string, l limiter.Limit) int64 {
	c.t.Helper()
	n := c.count(key)
	if c.spec.CountsDownFrom != 0 && n != 0 {
		return c.spec.CountsDownFrom - n
	}
	return n
}

// count reads the counter at key (0 when there is none).
func (c *checker) count(key string) int64 {
	c.t.Helper()
	r, err := c.do(store.Cmd{Name: "GET", Args: []any{key}})
	if errors.Is(r.Err, store.ErrNil) {
		return 0
	}
	if err != nil || r.Err != nil {
		c.t.Fatalf("GET %s: %v %v", key, err, r.Err)
	}
	n, err := store.Int64(r.Val)
	if err != nil {
		c.t.Fatalf("GET %s: %v", key, err)
	}
	return n
}

// do runs one command on the harness's store.
func (c *checker) do(cmd store.Cmd) (store.Reply, error) {
	rs, err := c.h.Store().Do(c.ctx, cmd)
	if err != nil {
		return store.Reply{}, err
	}
	return rs[0], nil
}

// keys returns every key under the check's prefix, on every master.
func (c *checker) keys() []string {
	c.t.Helper()
	var out []string
	for _, n := range c.h.Nodes() {
		out = append(out, c.scan(n)...)
	}
	return out
}

func (c *checker) scan(n store.Store) []string {
	c.t.Helper()
	var out []string
	cursor := "0"
	for {
		rs, err := n.Do(c.ctx, store.Cmd{Name: "SCAN", Args: []any{cursor, "MATCH", c.prefix + ":*", "COUNT", 1000}})
		if err == nil {
			err = rs[0].Err
		}
		if err != nil {
			c.t.Fatalf("SCAN: %v", err)
		}
		arr, err := store.Slice(rs[0].Val)
		if err != nil || len(arr) != 2 {
			c.t.Fatalf("SCAN reply %v: %v", rs[0].Val, err)
		}
		cursor, _ = store.String(arr[0])
		ks, _ := store.Slice(arr[1])
		for _, k := range ks {
			s, _ := store.String(k)
			out = append(out, s)
		}
		if cursor == "0" {
			return out
		}
	}
}

// pttl returns a key's PTTL in milliseconds (-1 no expiry, -2 missing).
func (c *checker) pttl(key string) int64 {
	c.t.Helper()
	r, err := c.do(store.Cmd{Name: "PTTL", Args: []any{key}})
	if err == nil {
		err = r.Err
	}
	if err != nil {
		c.t.Fatalf("PTTL %s: %v", key, err)
	}
	n, err := store.Int64(r.Val)
	if err != nil {
		c.t.Fatalf("PTTL %s: %v", key, err)
	}
	return n
}

// assertNoImmortalKeys fails for any key under the prefix whose PTTL is not
// in (0, maxTTL]: a key without expiry (-1) is a leak that blocks its
// subject forever.
func (c *checker) assertNoImmortalKeys(maxTTL time.Duration) {
	c.t.Helper()
	for _, k := range c.keys() {
		p := c.pttl(k)
		if p == -2 {
			continue // expired between SCAN and PTTL
		}
		if p == -1 {
			c.t.Errorf("property 12: key %q has no TTL (immortal)", k)
		} else if time.Duration(p)*time.Millisecond > maxTTL {
			c.t.Errorf("property 12: key %q has PTTL %dms, above the bound %s", k, p, maxTTL)
		}
	}
}

// hammer runs g goroutines, released together, each calling fn m times,
// and counts the outcomes.
func hammer(g, m int, fn func(worker, i int) (limiter.Result, error)) (allowed, denied int64, errs []error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := 0; w < g; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var a, d int64
			var es []error
			for i := 0; i < m; i++ {
				r, err := fn(w, i)
				switch {
				case err != nil:
					es = append(es, err)
				case r.Allowed:
					a++
				default:
					d++
				}
			}
			mu.Lock()
			allowed, denied, errs = allowed+a, denied+d, append(errs, es...)
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return allowed, denied, errs
}

// firstErrs formats up to three errors.
func firstErrs(errs []error) string {
	var b strings.Builder
	for i, e := range errs {
		if i == 3 {
			fmt.Fprintf(&b, " (and %d more)", len(errs)-3)
			break
		}
		fmt.Fprintf(&b, "; %v", e)
	}
	return b.String()
}
