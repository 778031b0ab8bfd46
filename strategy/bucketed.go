package strategy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/argcache"
	"github.com/quotagate/limiter/internal/derive"
	"github.com/quotagate/limiter/store"
)

// Bucketed counts cost per limit in windows aligned to the Unix epoch, with
// the window's index in the key (a "key-MMddHHmm" design done right: epoch
// windows on the server's clock, every key with its expiry), and no Lua:
// for servers that forbid or restrict scripting.
//
// A decision is one round trip,
//
//	MULTI; TIME; INCRBY key:bucket cost; PEXPIREAT key:bucket end+grace; ...; EXEC
//
// atomic on the server, for all limits at once. The expiry is an absolute
// time, the same on every call of a window, so the window never slides, and
// every key carries it from the command that creates it: no key is ever
// left without a TTL and no cleanup job is needed.
//
// Guarantees:
//   - windows: [b·Period, (b+1)·Period) since the Unix epoch, by the
//     server's clock. The bucket index b is computed from the app clock
//     (WithClock, default the system clock) plus an offset to Redis TIME,
//     sampled on first use and refreshed by the TIME inside every
//     transaction; the transaction's TIME also verifies the index, and a
//     decision stamped with the wrong bucket (a call racing a window's end,
//     a server clock that jumped) is undone and redone on the right one in
//     the same kind of round trip. Never time zones, never formatting: the
//     key is key + ":" + decimal b;
//   - at most Rate admitted per window: each admission is an INCRBY whose
//     result is at most Rate;
//   - denied requests consume nothing once compensated: a request that
//     pushes any limit past its Rate is denied and its cost taken back from
//     every limit (DECRBY, with the same PEXPIREAT) in a second round trip.
//     In between, other callers see the transient over-count, so under
//     contention Bucketed may deny a request that would fit (conservative,
//     never over-admitting): not exact. The compensation runs on a context
//     detached from the caller's and bounded by 1 s, so a caller whose
//     context ends between the round trips (a client gone, a deadline)
//     leaves no over-count. A compensation that fails (Redis lost between
//     the two round trips) leaves an over-count that lasts until the
//     window ends; the call still returns its denial, with the error as
//     the Result's Cause, which the Limiter's Observer is told. Work on
//     the detached context may make a call return up to 1 s after its
//     deadline, when Redis is slow just then. A denial whose request fits
//     every limit once its cost is taken back (it rested on other calls'
//     costs, taken back meanwhile) has a RetryAfter of 1 ms, not the rest
//     of the window;
//   - a take-back that finds its key gone (deleted by a Reset, evicted,
//     between the count and the take-back) leaves it at 0, not below (SET
//     NX of the cost before the DECRBY). Only when another call counts on
//     the key between its deletion and the take-back can the window admit
//     past its Rate, by at most the costs of the denials whose take-backs
//     were in flight;
//   - a decision is counted only in the windows that the TIME of its own
//     transaction names. When the round trip is about as long as a window,
//     so that the server's TIME names other windows on every one of a few
//     attempts, the decision is taken back and denied until the current
//     window ends, with ErrStaleWindow as the Result's Cause: never counted
//     in a window that is over, nor in a key that expires in the same
//     transaction;
//   - a counter that INCRBY cannot read, or a key of another type, is
//     limiter.ErrCorruptCounter; the increments of the other limits are
//     taken back (on the detached context) before the call returns, so no
//     counter is left moved unless Redis is lost just then; the corrupt
//     key keeps its value but gets its window's expiry, set in the same
//     transaction (MULTI runs the PEXPIREAT after the INCRBY it refused:
//     no command makes it conditional without Lua);
//   - a multi-limit call is all-or-nothing in the same sense: the
//     increments of a denied call are taken back from every limit;
//   - round trips: 1 for an admitted request, 2 for a denied one, 1 for a
//     peek (MULTI, TIME, GET, EXEC), plus one TIME per store on first use;
//     a decision moved to the server's window takes one more per move (up
//     to 4 in all, 5 for a stale denial);
//   - key lifetime: the window's end plus a grace (WithGrace, default 1 s,
//     capped at one Period), so that Redis nodes whose clocks differ a
//     little (a failover) never drop a live window early;
//   - boundary bursts: up to 2×Rate in any interval one Period long, as any
//     fixed window;
//   - keys per decision: one per limit (and window), in one Cluster slot;
//     the transactions go through Store.Do as MULTI ... EXEC, which the
//     adapter must run as one transaction on the keys' node (the go-redis
//     adapter uses TxPipeline, which a ClusterClient routes by slot), and
//     redirect whole while the slot moves (MOVED; ASK, with ASKING before
//     MULTI). A transaction a node refuses with TRYAGAIN (its keys split
//     by the slot's migration: nothing ran) is sent again after
//     store.TryAgainPause;
//   - quota leases (limiter.WithQuotaLease) are given back
//     (limiter.QuotaReturner) to the window whose index their key names,
//     while it has more than 2 ms left, with WATCH and MULTI/EXEC: a
//     store.Watcher is needed for that, and a write to the counter in
//     between (another process counting on it) aborts the transaction,
//     which is tried up to 3 times; then the units stay where they are, so
//     a subject that other processes decide thousands of times a second
//     rarely gets its units back;
//   - Redis 5.0 or later, as the rest of the library (it needs only
//     MULTI/EXEC, TIME, SET NX and PEXPIREAT); no scripting.
type Bucketed struct {
	epochClock
	grace time.Duration
}

// epochClock is what the epoch-aligned strategies share: the app clock and,
// per store, the app clock's offset to the server's TIME.
type epochClock struct {
	now func() time.Time
	// own: now was given by a clock option (UseClock lends one, which a
	// later UseClock may replace while nothing was decided)
	own bool
	// name names the strategy in errors.
	name string

	// clocks holds one serverClock per store (each store may reach another
	// server, with another clock); a few entries at most in practice.
	mu     sync.Mutex
	clocks map[store.Store]*serverClock
	shared serverClock // for stores that cannot be map keys
	// last is the entry clockFor found last: most programs have one store.
	last atomic.Pointer[clockEntry]
}

type clockEntry struct {
	st store.Store
	c  *serverClock
}

// same reports st == e.st. It never panics: e.st was a map key (clockFor
// stores an entry only after b.clocks[st] took it), so every dynamic type
// in it is comparable, and == panics only on two values that hold the same
// type that is not.
func (e *clockEntry) same(st store.Store) bool { return e.st == st }

// DerivesKeys tells the Limiter that Decide names its keys with
// limiter.Request.AppendKey (each window's key extends the request's key),
// so that the Limiter builds no key of its own for a decision. It is
// internal to this module (its argument's type is) and returns b: a type
// that embeds a Bucketed gets Request.Keys built.
func (b *Bucketed) DerivesKeys(derive.Token) any { return b }

// UseClock makes now the app clock of a strategy that was given no clock
// option and has decided nothing yet (a clock an earlier UseClock gave is
// replaced then), and reports whether it did. It is internal to this
// module (its argument's type is): limitertest.New gives its test server's
// clock to the strategies that read the app's clock, a strategy shared by
// several tests the clock of the last.
func (e *epochClock) UseClock(_ derive.Token, now func() time.Time) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.own || len(e.clocks) > 0 || e.last.Load() != nil {
		return false
	}
	e.now = now
	return true
}

func newEpochClock(name string) epochClock {
	return epochClock{now: monoNow, name: name, clocks: map[store.Store]*serverClock{}}
}

// wallAtStart anchors monoNow.
var wallAtStart = time.Now()

// monoNow is the default app clock of the epoch-aligned strategies: the
// wall clock read once, at start, plus the monotonic time since. It reads
// one clock where time.Now reads two (on some virtual machines each read
// costs tens of nanoseconds), and a step of the wall clock (set by hand, or
// by NTP) does not move it. Either way the strategies use only its offset
// to Redis TIME, which they measure and refresh when a call finds it off.
func monoNow() time.Time { return wallAtStart.Add(time.Since(wallAtStart)) }

// BucketedOption configures a Bucketed.
type BucketedOption func(*Bucketed)

// WithClock sets the app clock Bucketed aligns to Redis TIME (default: the
// system clock, read once and then as the monotonic time since). Only its
// Unix time is used, never its location.
func WithClock(now func() time.Time) BucketedOption {
	return func(b *Bucketed) {
		if now != nil {
			b.now, b.own = now, true
		}
	}
}

// WithGrace sets how long a window's key outlives the window (default 1 s;
// capped at one Period per limit; negative means 0).
func WithGrace(d time.Duration) BucketedOption {
	return func(b *Bucketed) { b.grace = max(d, 0) }
}

// NewBucketed returns the Bucketed strategy.
func NewBucketed(opts ...BucketedOption) *Bucketed {
	b := &Bucketed{epochClock: newEpochClock("bucketed"), grace: time.Second}
	for _, o := range opts {
		if o != nil { // an option chosen conditionally and left unset
			o(b)
		}
	}
	return b
}

// maxClockEntries bounds the per-store clock map; past it the map starts
// over (a store seen again re-samples TIME once).
const maxClockEntries = 64

// maxStamps bounds how many transactions one decision tries to land in the
// buckets the server's TIME names. Past it the decision is taken back and
// denied (only windows about as short as a round trip get there).
const maxStamps = 4

// serverClock is the offset from the app clock to a server's TIME.
type serverClock struct {
	synced atomic.Bool
	offset atomic.Int64 // microseconds: server - app
	// bound is the latest time the server's clock may show, as
	// latestAt reads it: from the last TIME reading, the server read its
	// clock after the call was sent (at t0), so at app time t it shows at
	// most t + (serverUs - t0) + clockRate·(t - t0), where clockRate bounds
	// how much faster the server's clock may run than the app's. It holds
	// serverUs - t0 - clockRate·t0, so that one atomic word carries it
	// (any reading's bound is a bound: concurrent readings may land in any
	// order).
	bound atomic.Int64
}

// clockRateDiv is 1/clockRate: clocks are taken to run at rates within
// 100 ppm of each other (NTP-disciplined clocks stay within a few ppm).
const clockRateDiv = 10_000

func (b *epochClock) clockFor(st store.Store) (c *serverClock) {
	if e := b.last.Load(); e != nil && e.same(st) {
		return e.c
	}
	defer func() {
		if recover() != nil { // a store whose dynamic type is not comparable
			c = &b.shared
		}
	}()
	b.mu.Lock()
	defer b.mu.Unlock()
	if c = b.clocks[st]; c == nil {
		if len(b.clocks) >= maxClockEntries {
			clear(b.clocks)
		}
		c = new(serverClock)
		b.clocks[st] = c
	}
	b.last.Store(&clockEntry{st: st, c: c}) // after the map took st: see same
	return c
}

// observe records a TIME reply of serverUs received in a round trip sent at
// t0 and answered at t1 (app clock).
func (c *serverClock) observe(t0, t1 time.Time, serverUs int64) {
	mid := t0.UnixMicro() + t1.Sub(t0).Microseconds()/2
	c.offset.Store(serverUs - mid)
	sent := t0.UnixMicro()
	c.bound.Store(serverUs - sent - sent/clockRateDiv)
	c.synced.Store(true)
}

// latestAt returns the latest time, in microseconds, that the server's
// clock may show at app time t (after a reading: synced), rather than the
// estimate: a time left in a window counted from it is never longer than
// the window's on the server.
func (c *serverClock) latestAt(t time.Time) int64 {
	us := t.UnixMicro()
	return us + c.bound.Load() + us/clockRateDiv
}

// serverNow returns the estimated server time in microseconds, sampling
// TIME first when the clock has never been synced.
func (b *epochClock) serverNow(ctx context.Context, st store.Store, c *serverClock) (int64, error) {
	now, _, err := b.serverNowAt(ctx, st, c)
	return now, err
}

// serverNowAt is serverNow that also returns the app clock's reading it
// estimated from, for a caller that times the round trip it sends next:
// time.Now is not free, and a decision's hot path reads it once.
func (b *epochClock) serverNowAt(ctx context.Context, st store.Store, c *serverClock) (int64, time.Time, error) {
	if !c.synced.Load() {
		if _, err := b.readTime(ctx, st, c); err != nil {
			return 0, time.Time{}, err
		}
	}
	at := b.now()
	return at.UnixMicro() + c.offset.Load(), at, nil
}

// readTime reads the server's clock (TIME), in microseconds, and records
// it in c.
func (b *epochClock) readTime(ctx context.Context, st store.Store, c *serverClock) (int64, error) {
	t0 := b.now()
	rs, err := st.Do(ctx, store.Cmd{Name: "TIME"})
	t1 := b.now()
	if err != nil {
		return 0, fmt.Errorf("strategy: %s: TIME: %w", b.name, err)
	}
	if rs[0].Err != nil {
		return 0, fmt.Errorf("strategy: %s: TIME: %w", b.name, rs[0].Err)
	}
	us, err := parseTime(rs[0].Val)
	if err != nil {
		return 0, err
	}
	c.observe(t0, t1, us)
	return us, nil
}

// parseTime reads a TIME reply, [seconds, microseconds], as microseconds.
func parseTime(v any) (int64, error) {
	arr, err := store.Slice(v)
	if err == nil && len(arr) != 2 {
		err = fmt.Errorf("%d elements", len(arr))
	}
	var sec, usec int64
	if err == nil {
		sec, err = store.Int64(arr[0])
	}
	if err == nil {
		usec, err = store.Int64(arr[1])
	}
	if err != nil {
		return 0, fmt.Errorf("strategy: bad TIME reply %v: %w", v, err)
	}
	return sec*1_000_000 + usec, nil
}

// buckets holds a decision's per-limit window indexes and keys.
type buckets struct {
	idx  []int64
	keys []string
	// aligned names keys as AlignedWindow does (alignedKey), not as
	// Bucketed does (bucketKey)
	aligned bool
}

func (bs *buckets) stamp(req *limiter.Request, serverUs int64) {
	ms := serverUs / 1000
	if bs.idx == nil {
		bs.idx = make([]int64, len(req.Limits))
		bs.keys = make([]string, len(req.Limits))
	}
	for i, l := range req.Limits {
		idx := ms / l.Period.Milliseconds()
		if bs.keys[i] == "" || bs.idx[i] != idx {
			bs.idx[i] = idx
			bs.keys[i] = windowName(req, i, idx, bs.aligned)
		}
	}
}

// bucketKey is key + ":" + idx. The limiter's key never ends in a decimal
// number after a colon that the index could be confused with: the index is
// always the part after the last colon.
func bucketKey(key string, idx int64) string { return windowKey(key, -1, idx) }

// windowName is the counter of limit i's window idx: as AlignedWindow
// names it when aligned (alignedKey), else as Bucketed does (bucketKey).
// It is laid out with Request.AppendKey, in one allocation, so that
// strategies built on it are derive.KeyDeriver.
func windowName(req *limiter.Request, i int, idx int64, aligned bool) string {
	var arr [maxKeyLen]byte
	period := int64(-1)
	if aligned {
		period = req.Limits[i].Period.Milliseconds()
	}
	return string(append(req.AppendKey(arr[:0], i), windowSuffix(period, idx)...))
}

// windowSuffixes remembers what appendWindow appends, for the windows
// used last: a service's limits have a few periods, each in one window at
// a time.
var windowSuffixes argcache.Cache[suffix]

type suffix struct {
	period int64
	text   string
}

// windowSuffix returns what appendWindow appends for period and idx.
func windowSuffix(period, idx int64) string {
	// The cache's integer mixes both; with the period, it gives the idx.
	v := idx ^ period<<32
	if s, ok := windowSuffixes.Get(v); ok && s.period == period {
		return s.text
	}
	text := string(appendWindow(nil, period, idx))
	windowSuffixes.Put(v, suffix{period, text})
	return text
}

// maxKeyLen is room for most window keys on the stack: a longer prefix,
// subject or limit name spills to the heap.
const maxKeyLen = 160

// windowKey is key + ":" + period + ":" + idx, or key + ":" + idx for a
// negative period, in one allocation.
func windowKey(key string, period, idx int64) string {
	var arr [maxKeyLen]byte
	return string(appendWindow(append(arr[:0], key...), period, idx))
}

// appendWindow appends ":" + period + ":" + idx, or ":" + idx for a
// negative period, to a key.
func appendWindow(buf []byte, period, idx int64) []byte {
	buf = append(buf, ':')
	if period >= 0 {
		buf = strconv.AppendInt(buf, period, 10)
		buf = append(buf, ':')
	}
	return strconv.AppendInt(buf, idx, 10)
}

// matches reports whether serverUs falls in the windows bs was stamped with.
func (bs *buckets) matches(req limiter.Request, serverUs int64) bool {
	ms := serverUs / 1000
	for i, l := range req.Limits {
		if ms/l.Period.Milliseconds() != bs.idx[i] {
			return false
		}
	}
	return true
}

// expireAt is the absolute expiry, in Unix milliseconds, of limit l's key in
// window idx: the window's end plus the grace (at most one Period).
func (b *Bucketed) expireAt(l limiter.Limit, idx int64) int64 {
	p := l.Period.Milliseconds()
	return (idx+1)*p + min(b.grace, l.Period).Milliseconds()
}

// Decide implements limiter.Strategy.
func (b *Bucketed) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	c := b.clockFor(st)
	now, err := b.serverNow(ctx, st, c)
	if err != nil {
		return limiter.Result{}, err
	}
	var bs buckets
	bs.stamp(&req, now)
	if req.DryRun || req.Cost == 0 || neverFits(req) {
		return b.peek(ctx, st, c, req, &bs)
	}
	return b.consume(ctx, st, c, req, &bs)
}

// neverFits reports a cost above some limit's Rate: the request is denied
// whatever the counters say, so it is decided by a read.
func neverFits(req limiter.Request) bool {
	for _, l := range req.Limits {
		if req.Cost > l.Rate {
			return true
		}
	}
	return false
}

// peek decides by reading the counters: TIME and GET in one transaction,
// so that the time and the counters are one snapshot from the keys' node.
func (b *Bucketed) peek(ctx context.Context, st store.Store, c *serverClock, req limiter.Request, bs *buckets) (limiter.Result, error) {
	n := len(req.Limits)
	cmds := make([]store.Cmd, 0, 3+n)
	var counts [limiter.MaxLimits]int64
	for attempt := 1; ; attempt++ {
		cmds = append(cmds[:0], store.Cmd{Name: "MULTI"}, store.Cmd{Name: "TIME"})
		for i := range n {
			cmds = append(cmds, store.Cmd{Name: "GET", Args: []any{bs.keys[i]}})
		}
		cmds = append(cmds, store.Cmd{Name: "EXEC"})
		t0 := b.now()
		vals, err := execReply(ctx, st, cmds)
		t1 := b.now()
		if err != nil {
			return limiter.Result{}, err
		}
		now, err := parseTime(vals[0])
		if err != nil {
			return limiter.Result{}, err
		}
		c.observe(t0, t1, now)
		if !bs.matches(req, now) && attempt < maxStamps {
			bs.stamp(&req, now)
			continue
		}
		for i := range n {
			counts[i] = 0
			if vals[1+i] == nil {
				continue
			}
			if counts[i], err = parseRedisInt(vals[1+i]); err == nil && counts[i] > maxCounter {
				err = fmt.Errorf("%w: %d is out of range", limiter.ErrCorruptCounter, counts[i])
			}
			if err != nil {
				return limiter.Result{}, fmt.Errorf("strategy: bucketed: GET %s: %w", bs.keys[i], err)
			}
			// Below 0 after a take-back met a reset key: nothing counted.
			counts[i] = max(counts[i], 0)
		}
		allowed := true
		for i, l := range req.Limits {
			if !fits(counts[i], req.Cost, l.Rate) {
				allowed = false
			}
		}
		return bindBuckets(req, bs, now, counts[:n], counts[:n], allowed, false), nil
	}
}

// fits reports whether cost fits on top of count within rate, without
// overflowing.
func fits(count, cost, rate int64) bool {
	return cost <= rate && count <= rate-cost
}

// ErrStaleWindow is the Cause of a Bucketed or AlignedWindow denial made
// because the server's TIME, read in the decision's own round trip, named
// other windows than the ones the decision was sent for, on every attempt:
// a round trip about as long as the window. The request was taken back,
// counted in no window.
var ErrStaleWindow = errors.New("strategy: the round trip is as long as the window: the decision could not be counted in the server's current window")

// consume increments every limit's bucket in one transaction, moves the
// decision to the server's buckets when the stamp was wrong, and takes the
// cost back when any limit is exceeded, when the decision could not be
// placed in the server's windows, or when a counter is corrupt.
func (b *Bucketed) consume(ctx context.Context, st store.Store, c *serverClock, req limiter.Request, bs *buckets) (limiter.Result, error) {
	n := len(req.Limits)
	var prev buckets // the stamp of the previous attempt, to take back
	var after [limiter.MaxLimits]int64
	var now int64
	// From the second attempt on, a transaction also takes back the count
	// of the attempt before, and a denial is taken back too: they run on a
	// context detached from the caller's, so that the caller's end cannot
	// leave a count behind.
	var dc detached
	defer dc.cancel()
	stale := false
	for attempt := 1; ; attempt++ {
		cmds := make([]store.Cmd, 0, 3+2*n+3*len(prev.keys))
		cmds = append(cmds, store.Cmd{Name: "MULTI"})
		cmds = prev.appendTakeBack(cmds, b, req, nil)
		cmds = append(cmds, store.Cmd{Name: "TIME"})
		for i, k := range bs.keys {
			cmds = append(cmds,
				store.Cmd{Name: "INCRBY", Args: []any{k, req.Cost}},
				store.Cmd{Name: "PEXPIREAT", Args: []any{k, b.expireAt(req.Limits[i], bs.idx[i])}})
		}
		cmds = append(cmds, store.Cmd{Name: "EXEC"})
		txCtx := ctx
		if attempt > 1 {
			txCtx = dc.from(ctx)
		}
		t0 := b.now()
		vals, err := execVals(txCtx, st, cmds)
		t1 := b.now()
		if err != nil {
			if attempt > 1 {
				return limiter.Result{}, b.restampFailed(dc.from(ctx), st, req, &prev, err)
			}
			return limiter.Result{}, err
		}
		// A queued command that failed (a counter INCRBY cannot read, a key
		// of another type) failed alone: EXEC ran the others. Take back
		// this attempt's increments that were applied, and fail.
		base := 3 * len(prev.keys)
		var applied [limiter.MaxLimits]bool
		var bad error
		for i, v := range vals {
			j := i - base - 1 // INCRBY of limit j/2 when j is even
			if e, ok := v.(error); ok {
				if bad == nil {
					bad = fmt.Errorf("strategy: bucketed: %s: %w", cmds[1+i].Name, corruptErr(e))
				}
				continue
			}
			if j >= 0 && j%2 == 0 {
				applied[j/2] = true
				if after[j/2], err = store.Int64(v); err != nil && bad == nil {
					bad = fmt.Errorf("strategy: bucketed: INCRBY %s: %w", bs.keys[j/2], err)
				} else if after[j/2] > maxCounter && bad == nil {
					// a count no limit reaches: not a counter of ours
					bad = fmt.Errorf("strategy: bucketed: INCRBY %s: %w: %d is out of range", bs.keys[j/2], limiter.ErrCorruptCounter, after[j/2])
				}
			}
		}
		if bad == nil {
			now, bad = parseTime(vals[base])
		}
		if bad != nil {
			if err := b.takeBack(dc.from(ctx), st, req, bs, applied[:n], nil); err != nil {
				return limiter.Result{}, fmt.Errorf("%w (%w)", bad, err)
			}
			return limiter.Result{}, bad
		}
		c.observe(t0, t1, now)
		if bs.matches(req, now) {
			break
		}
		if attempt == maxStamps {
			// The server's TIME named other windows every time: the round
			// trip is about as long as a window. Counting in a window that
			// is over (whose key may have expired in this very EXEC) could
			// admit past the limit, so the decision is taken back and
			// denied.
			stale = true
			break
		}
		// Stamped with the wrong window: take this attempt back and count
		// in the server's windows instead, in the same transaction.
		prev = buckets{idx: append([]int64(nil), bs.idx...), keys: append([]string(nil), bs.keys...)}
		bs.stamp(&req, now)
	}
	var before [limiter.MaxLimits]int64
	allowed := !stale
	for i, l := range req.Limits {
		before[i] = after[i] - req.Cost
		if after[i] > l.Rate {
			allowed = false
		}
	}
	if allowed {
		return bindBuckets(req, bs, now, before[:n], after[:n], true, false), nil
	}
	// Denied: take the cost back from every limit. The decision stands
	// whether or not this succeeds; a failure leaves an over-count that
	// ends with the window, and is the Result's Cause.
	var left [limiter.MaxLimits]int64
	err := b.takeBack(dc.from(ctx), st, req, bs, nil, &left)
	var res limiter.Result
	if err == nil {
		// The counts once this request is taken back: when the request
		// fits every limit now, the denial rested on other calls' costs
		// that were being taken back too, and it can be tried again at
		// once, not when the window ends.
		res = bindBuckets(req, bs, now, left[:n], left[:n], false, stale)
		if res.RetryAfter == 0 {
			res.RetryAfter = time.Millisecond
		}
	} else {
		res = bindBuckets(req, bs, now, before[:n], before[:n], false, stale)
	}
	switch {
	case stale && err != nil:
		res.Cause = fmt.Errorf("%w (%v)", ErrStaleWindow, err)
	case stale:
		res.Cause = ErrStaleWindow
	default:
		res.Cause = err
	}
	return res, nil
}

// compensateTimeout bounds the work a decision does on a context detached
// from the caller's: taking back a count (a denied request's, a wrong
// window's). The caller's end (a client gone, a deadline met) must not
// leave the count behind, so a call may return up to this much later than
// its context's deadline, when Redis is slow just then.
const compensateTimeout = time.Second

// detached is a context detached from a call's, bounded by
// compensateTimeout from its first use; the zero value is ready.
type detached struct {
	ctx  context.Context
	stop context.CancelFunc
}

// from returns the detached context, made from parent on first use.
func (d *detached) from(parent context.Context) context.Context {
	if d.ctx == nil {
		d.ctx, d.stop = context.WithTimeout(context.WithoutCancel(parent), compensateTimeout)
	}
	return d.ctx
}

func (d *detached) cancel() {
	if d.stop != nil {
		d.stop()
	}
}

// restampFailed is the error of a call whose attempt after the first
// failed with err: the attempt before it counted the call in prev's
// windows (the wrong ones), and that attempt's transaction was to take it
// back. When err says the transaction was not sent, nothing of it ran: the
// earlier count is taken back here, and err is the call's error; if that
// fails, or err says the transaction may have run (it would have taken the
// count back itself, and counted in the right windows), the call's outcome
// is unknown.
func (b *Bucketed) restampFailed(ctx context.Context, st store.Store, req limiter.Request, prev *buckets, err error) error {
	if errors.Is(err, store.ErrUnknownOutcome) {
		return err
	}
	if terr := b.takeBack(ctx, st, req, prev, nil, nil); terr != nil {
		return fmt.Errorf("%w: %w; the count of the call's earlier attempt, in other windows, stays: %w", store.ErrUnknownOutcome, err, terr)
	}
	return err
}

// takeBack takes the cost back from the keys of bs (only those marked in
// only, unless it is nil) in one transaction on ctx. When left is not nil,
// it receives each limit's count once the cost is taken back.
func (b *Bucketed) takeBack(ctx context.Context, st store.Store, req limiter.Request, bs *buckets, only []bool, left *[limiter.MaxLimits]int64) error {
	cmds := make([]store.Cmd, 0, 2+3*len(bs.keys))
	cmds = append(cmds, store.Cmd{Name: "MULTI"})
	cmds = bs.appendTakeBack(cmds, b, req, only)
	if len(cmds) == 1 {
		return nil
	}
	cmds = append(cmds, store.Cmd{Name: "EXEC"})
	vals, err := execReply(ctx, st, cmds)
	if err != nil {
		return fmt.Errorf("taking the count back: %w", err)
	}
	if left != nil {
		j := 0
		for i := range bs.keys {
			if only != nil && !only[i] {
				continue
			}
			v, err := store.Int64(vals[3*j+1]) // DECRBY's
			if err != nil {
				return fmt.Errorf("taking the count back: DECRBY %s: %w", bs.keys[i], err)
			}
			left[i] = max(v, 0)
			j++
		}
	}
	return nil
}

// appendTakeBack appends, for each key of bs (only those marked in only,
// unless it is nil), the commands that take the cost back:
//
//	SET key cost NX; DECRBY key cost; PEXPIREAT key end+grace
//
// DECRBY alone, on a key that is gone (deleted by a Reset, evicted, between
// the count and its take-back), would create it at −cost, and the window
// would then admit cost more than its Rate. SET NX first puts the cost
// there only when the key is gone, so that the take-back leaves such a key
// at 0 and any other at its count less the cost: no read, no second round
// trip (without Lua a write cannot be made conditional otherwise, and
// WATCH would abort under the very contention a hot denied subject brings).
func (bs *buckets) appendTakeBack(cmds []store.Cmd, b *Bucketed, req limiter.Request, only []bool) []store.Cmd {
	for i, k := range bs.keys {
		if only != nil && !only[i] {
			continue
		}
		cmds = append(cmds,
			store.Cmd{Name: "SET", Args: []any{k, req.Cost, "NX"}},
			store.Cmd{Name: "DECRBY", Args: []any{k, req.Cost}},
			store.Cmd{Name: "PEXPIREAT", Args: []any{k, b.expireAt(req.Limits[i], bs.idx[i])}})
	}
	return cmds
}

// execVals runs a MULTI ... EXEC pipeline and returns EXEC's replies, one
// per queued command; a queued command that failed is an error value. Its
// error wraps store.ErrUnknownOutcome when the commands may have run: a
// round trip's (as the store says), a refused MULTI (an ACL without it:
// the server ran each command on its own), replies that do not match the
// commands; a command refused when queued aborts EXEC: nothing ran. A
// transaction a Cluster node refused with TRYAGAIN (its keys split by a
// slot's migration: nothing ran) is sent again after store.TryAgainPause,
// while that allows.
func execVals(ctx context.Context, st store.Store, cmds []store.Cmd) ([]any, error) {
	rs, err := st.Do(ctx, cmds...)
	for try := 1; refusedTryAgain(rs, err) && store.TryAgainPause(ctx, try); try++ {
		rs, err = st.Do(ctx, cmds...)
	}
	if err != nil {
		return nil, fmt.Errorf("strategy: bucketed: %w", err)
	}
	if len(rs) != len(cmds) {
		return nil, fmt.Errorf("strategy: bucketed: %w: %d replies for %d commands", store.ErrUnknownOutcome, len(rs), len(cmds))
	}
	if rs[0].Err != nil {
		return nil, fmt.Errorf("strategy: bucketed: %w: MULTI refused, the commands ran on their own: %w", store.ErrUnknownOutcome, rs[0].Err)
	}
	for i, r := range rs[1 : len(rs)-1] {
		if r.Err != nil {
			return nil, fmt.Errorf("strategy: bucketed: %s: %w", cmds[1+i].Name, r.Err)
		}
	}
	exec := rs[len(rs)-1]
	if exec.Err != nil {
		return nil, fmt.Errorf("strategy: bucketed: EXEC: %w", exec.Err)
	}
	vals, err := store.Slice(exec.Val)
	if err == nil && len(vals) != len(cmds)-2 {
		err = fmt.Errorf("%d replies for %d queued commands", len(vals), len(cmds)-2)
	}
	if err != nil {
		return nil, fmt.Errorf("strategy: bucketed: EXEC: %w: %w", store.ErrUnknownOutcome, err)
	}
	return vals, nil
}

// refusedTryAgain reports a MULTI ... EXEC call that did not run because a
// Cluster node refused it with TRYAGAIN: the call's error says so, or MULTI
// was accepted, EXEC refused (the server discarded the transaction) and
// TRYAGAIN is EXEC's error or a queued command's.
func refusedTryAgain(rs []store.Reply, err error) bool {
	if err != nil {
		return errors.Is(err, store.ErrTryAgain)
	}
	if len(rs) < 2 || rs[0].Err != nil || rs[len(rs)-1].Err == nil {
		return false
	}
	for _, r := range rs[1:] {
		if errors.Is(r.Err, store.ErrTryAgain) {
			return true
		}
	}
	return false
}

// execReply is execVals that fails when any queued command failed.
func execReply(ctx context.Context, st store.Store, cmds []store.Cmd) ([]any, error) {
	vals, err := execVals(ctx, st, cmds)
	if err != nil {
		return nil, err
	}
	for i, v := range vals {
		if e, ok := v.(error); ok {
			return nil, fmt.Errorf("strategy: bucketed: %s: %w", cmds[1+i].Name, corruptErr(e))
		}
	}
	return vals, nil
}

// bindBuckets builds the Result at server time nowUs: before[i] is limit i's count
// without this request, after[i] with it when it was consumed.
//
// In a stale decision, one that could not be counted in the server's
// windows, each limit whose stamped window is not the server's current one
// denies until that window ends.
func bindBuckets(req limiter.Request, bs *buckets, nowUs int64, before, after []int64, allowed, stale bool) limiter.Result {
	var bd limiter.Binder
	nowMs := nowUs / 1000
	for i, l := range req.Limits {
		p := l.Period.Milliseconds()
		reset := time.Duration(min(max((bs.idx[i]+1)*p-nowMs, 1), p)) * time.Millisecond
		off := stale && nowMs/p != bs.idx[i]
		if off {
			reset = time.Duration(p-nowMs%p) * time.Millisecond
		}
		var retry time.Duration
		switch {
		case req.Cost > l.Rate:
			retry = -1
		case off || !fits(before[i], req.Cost, l.Rate):
			retry = reset
		}
		bd.Add(i, l.Rate-max(after[i], 0), reset, retry)
	}
	return bd.Result(allowed)
}

// ResetRequest implements limiter.RequestResetter: it deletes the keys of
// the current window, and of the windows on either side, of every limit,
// the current one named by the server's clock, read first (two round
// trips: TIME, then DEL).
func (b *Bucketed) ResetRequest(ctx context.Context, st store.Store, req limiter.Request) error {
	return b.resetWindows(ctx, st, req, false)
}

// resetWindows deletes the keys of the current window, and of the windows
// on either side, of every limit of req.
//
// The windows are named from the server's clock, read first (TIME): a
// decision named from an estimate that was off finds out and goes again,
// a Reset would delete other windows than the server's and leave the
// count, and it is rare enough to pay a round trip more.
func (b *epochClock) resetWindows(ctx context.Context, st store.Store, req limiter.Request, aligned bool) error {
	now, err := b.readTime(ctx, st, b.clockFor(st))
	if err != nil {
		return err
	}
	args := make([]any, 0, 3*len(req.Limits))
	for i, l := range req.Limits {
		idx := now / 1000 / l.Period.Milliseconds()
		for d := int64(-1); d <= 1; d++ {
			args = append(args, windowName(&req, i, idx+d, aligned))
		}
	}
	r, err := store.DoAgain(ctx, st, store.Cmd{Name: "DEL", Args: args})
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return fmt.Errorf("strategy: %s: reset: %w", b.name, err)
	}
	return nil
}
