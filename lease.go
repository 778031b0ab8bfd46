package limiter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/quotagate/limiter/store"
)

// WindowQuota is implemented by strategies whose admitted units are counted
// in fixed windows: units consumed at one moment may be admitted one by one
// later, as long as that is before the window ends, and an admitted Result
// of a single-limit call has ResetAfter at most the time left in that
// window. WithQuotaLease leases quota only from such strategies
// (FixedWindow, AlignedWindow, Bucketed and Optimistic of package
// strategy); a refilling strategy (GCRA, a token bucket) or a sliding one
// would let leased units through in an interval where its bound does not
// allow them.
type WindowQuota interface {
	Strategy
	// WindowQuota marks the strategy; it is never called.
	WindowQuota()
}

// QuotaReturner is implemented by WindowQuota strategies that can give a
// quota lease's unused units back to the window they were counted in
// (Limiter.ReturnLeases), while it is open. A window is named by its end on
// the server's clock, so units are never given to a later window.
type QuotaReturner interface {
	WindowQuota
	// WindowEnd reads when the window of req's one limit, counted at its
	// key, ends, in milliseconds since the Unix epoch on the server's
	// clock, and the time it has left; end is 0 when it counts no window
	// (no key, or no TTL). req.Cost is 0.
	WindowEnd(ctx context.Context, st store.Store, req Request) (end int64, left time.Duration, err error)
	// ReturnQuota takes req.Cost units off the count of req's one limit if
	// its window still ends at end and counts at least that, and reports
	// whether it did. Anything else (the window ended, or was deleted and
	// counted anew) is left as it is.
	ReturnQuota(ctx context.Context, st store.Store, req Request, end int64) (bool, error)
}

// WithQuotaLease makes the Limiter lease quota for subjects it decides
// often, so that most of their decisions are made in the process without a
// round trip. A single-limit call of a subject with no lease in this
// process takes units of the limit's quota from Redis in one atomic step
// (an AllowN of units), admits itself from it, and later calls of the same
// subject and limit are admitted from what is left, in the process, until
// it is used up or the window the units were counted in ends. When Redis
// cannot give a whole lease (fewer than units remain) the calls go to Redis
// one by one until the window ends, exactly as without leases.
//
// It never over-admits: every unit admitted in the process was consumed in
// Redis first, in the window it is admitted in (the lease ends at the
// window's end as measured from before the request was sent, so before the
// server's). What it may do is under-admit: units leased by a process and
// not used before their window ends are lost to every process, at most
// units−1 per lease taken (one per process, subject and window while the
// process keeps fewer than MaxQuotaLeases leases), unless ReturnLeases gives them
// back while their window is open (a strategy that implements
// QuotaReturner: FixedWindow, Bucketed, Optimistic; not AlignedWindow); and
// Result.Remaining of a leased
// decision is this process's view (what Redis had left when the lease was
// taken, plus what the lease still holds). Calls with several limits, a
// cost above units, a limit whose rate is below units, Peek, AllowN(0) and
// AllowMany always go to Redis.
// Reset forgets the subject's leases in this process (those of the
// Limiter's With copies and originals too), and a lease taken
// while it ran admits only its own call (its units may have been counted
// in the counter Reset deleted); other processes keep their leases of the
// subject until they are used up or their windows end.
//
// A named limit counts in one key whatever its Rate, Period and Burst, so
// a rule changed under the same name (a rules reload) counts in the key
// its old form's leases were counted in, and a shorter Period ends their
// window early. In this process (the Limiter, its originals and its With
// copies) the old form's leases are dropped before a call of another form
// goes to Redis (their units are lost, as at a window's end), and none is
// taken while such a call is on its way. Two cases escape this: a call
// of the new form whose outcome is unknown (a timeout) may reach Redis
// after it returned, and a With copy with leases made while such a call
// was on its way does not know of it; a lease of the old form taken then
// goes on admitting after that call ended its window. So does a process
// whose rules change after another's, with the leases it holds. Around a
// rule change, up to units−1 per lease table and subject may thus be
// admitted beyond what the new form allows in its first window.
//
// units must be at least 2; the strategy must implement WindowQuota, or New
// returns ErrInvalidOption. Choose units well below a limit's Rate divided
// by the number of processes, so that a lease fits in what one process
// uses of a window.
func WithQuotaLease(units int64) Option {
	return func(l *Limiter) error {
		if units < 2 || units > MaxRate {
			return fmt.Errorf("%w: quota lease of %d units: want 2 to %d", ErrInvalidOption, units, MaxRate)
		}
		if _, ok := l.strategy.(WindowQuota); !ok {
			return fmt.Errorf("%w: quota lease: %T does not count in fixed windows (WindowQuota)", ErrInvalidOption, l.strategy)
		}
		l.leases = &leaseTable{units: units, now: time.Now, m: map[leaseID]*quotaLease{}, max: MaxQuotaLeases}
		return nil
	}
}

// MaxQuotaLeases is the most quota leases a Limiter keeps (with the copies
// With makes of it, which share them): past it, taking a lease drops the
// least recently used eighth of them. A dropped lease's unused units are
// lost as at its window's end, so the bound holds memory (about 250 bytes a
// lease, plus its subject's and its limit name's length) at the cost of
// under-admission, never of over-admission.
const MaxQuotaLeases = 1 << 16

// leaseTable holds the process's quota leases.
type leaseTable struct {
	units int64
	now   func() time.Time
	max   int // the most leases kept (MaxQuotaLeases; less in tests)

	mu    sync.Mutex
	m     map[leaseID]*quotaLease
	sweep int // size at which the next insert drops ended leases
	// flight: the forms of the calls on their way that count in each
	// lease's key (see begin)
	flight map[leaseID][]Limit
}

// leaseID names a lease by the counter its units were counted in: the
// subject and the limit, or, for a named limit, the subject and the name
// alone, as the counter's key (a rule changed in this process, another
// period or rate under the same name, counts in the same key, and may end
// its window early: the lease of the old form is dropped, not used after).
type leaseID struct {
	prefix, subject string
	limit           Limit
}

// leaseKey returns the leaseID of subject's lease under limit: named by
// the counter it counts in (a named limit's name, an unnamed one's
// Period).
func leaseKey(prefix, subject string, limit Limit) leaseID {
	if limit.Name != "" {
		return leaseID{prefix, subject, Limit{Name: limit.Name}}
	}
	return leaseID{prefix, subject, Limit{Period: limit.Period}}
}

// begin notes a call about to count in the keys of limits (sent to Redis,
// writing) and drops subject's leases counted in those keys under other
// forms (another Period, Rate or Burst under a named limit's name, another
// Rate or Burst for an unnamed one's Period): the call may end the window
// early (a shorter Period: a rules reload), and the old form's units must
// not be admitted after; they are lost, as a lease's whose window ends. A
// lease being taken meanwhile keeps nothing and admits only its taker's
// call, and while the call is on its way no lease of another form is
// taken (decideLeased sends such calls to Redis): end removes the note.
func (t *leaseTable) begin(prefix, subject string, limits []Limit) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range limits {
		id := leaseKey(prefix, subject, l)
		if ls := t.m[id]; ls != nil && ls.limit != l {
			if ls.taking != nil {
				ls.left, ls.leftUntil, ls.stale = 0, time.Time{}, true
			} else {
				delete(t.m, id)
			}
		}
		if t.flight == nil {
			t.flight = map[leaseID][]Limit{}
		}
		t.flight[id] = append(t.flight[id], l)
	}
}

// end removes the note begin made for a call of limits.
func (t *leaseTable) end(prefix, subject string, limits []Limit) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range limits {
		id := leaseKey(prefix, subject, l)
		f := t.flight[id]
		if i := slices.Index(f, l); i >= 0 {
			f = slices.Delete(f, i, i+1)
		}
		if len(f) == 0 {
			delete(t.flight, id)
		} else {
			t.flight[id] = f
		}
	}
}

// otherInFlight reports a call on its way that counts in id's key under
// another form than limit; t.mu is held.
func (t *leaseTable) otherInFlight(id leaseID, limit Limit) bool {
	for _, l := range t.flight[id] {
		if l != limit {
			return true
		}
	}
	return false
}

// quotaLease is one subject's lease under one limit: left units that may
// be admitted until leftUntil (the end of the window they were counted in),
// and, after Redis could not give a whole lease, direct until directUntil:
// calls the lease cannot cover go to Redis one by one until then. taking is
// non-nil while a caller takes a new lease; the others wait for it.
type quotaLease struct {
	// limit is the form of the limit the units were counted under
	limit       Limit
	stale       bool // another form counted in its key while it was taken
	left        int64
	remaining   int64 // what Redis had left beside the lease when it was taken
	leftUntil   time.Time
	direct      bool
	directUntil time.Time
	taking      *leaseTake
	// For ReturnLeases: how long the lease's call took (from before it
	// was sent to its reply), and when the lease last admitted a call.
	took time.Duration
	used time.Time
}

// leaseTake is a lease being taken: done is closed when Redis has
// answered, or the call failed; failed (with the error the call failed
// on) when Redis could not decide it for a reason other than the taker's
// context. The waiters each apply their own Limiter's fail mode to it (a
// copy made by With shares the table, with a fail mode of its own).
type leaseTake struct {
	done   chan struct{}
	failed bool
	cause  error
}

func newLeaseTake() *leaseTake { return &leaseTake{done: make(chan struct{})} }

// ended reports a lease with nothing left to do at now.
func (ls *quotaLease) ended(now time.Time) bool {
	return ls.taking == nil && !now.Before(ls.leftUntil) && (!ls.direct || !now.Before(ls.directUntil))
}

// leaseMargin is taken off a lease's end, against clocks that run at
// slightly different rates on the app server and on Redis.
const leaseMargin = time.Millisecond

// decideLeased decides a single-limit call with cost > 0 from the
// subject's lease, taking a new one when it has none. ok is false when the
// call must go to Redis as usual.
func (l *Limiter) decideLeased(ctx context.Context, key string, cost int64, limit Limit) (Result, error, bool) {
	t := l.leases
	if cost > t.units || t.units > limit.Rate {
		return Result{}, nil, false
	}
	id := leaseKey(l.keys.prefix, key, limit)
	for {
		t.mu.Lock()
		if t.otherInFlight(id, limit) {
			// another form of the limit is on its way (a rules reload):
			// it may end the window a lease would be counted in
			t.mu.Unlock()
			return Result{}, nil, false
		}
		ls := t.m[id]
		now := t.now()
		switch {
		case ls == nil || ls.ended(now) || (ls.taking == nil && ls.limit != limit):
			// No lease, its window ended, or it is another form's of a
			// named limit (a rule changed: its key's window may have been
			// ended early): this caller takes one.
			ls = &quotaLease{taking: newLeaseTake(), limit: limit}
			t.insert(id, ls, now)
			t.mu.Unlock()
			return l.takeLease(ctx, t, ls, key, cost, limit)
		case ls.left >= cost && now.Before(ls.leftUntil):
			ls.left -= cost
			ls.used = now
			r := Result{Allowed: true, Remaining: ls.remaining + ls.left, ResetAfter: ls.leftUntil.Sub(now), Limit: limit, Leased: true}
			t.mu.Unlock()
			return r, nil, true
		case ls.taking != nil:
			tk := ls.taking
			t.mu.Unlock()
			select {
			case <-tk.done:
				if tk.failed {
					// Redis could not decide the lease: the waiters
					// share its failure instead of each trying in turn
					// (which would add up their timeouts).
					r, err := l.failed(tk.cause, limit)
					return r, err, true
				}
				continue
			case <-ctx.Done():
				return Result{}, nil, false // decide in Redis, which reports ctx's end
			}
		case ls.direct && now.Before(ls.directUntil):
			t.mu.Unlock()
			return Result{}, nil, false
		default:
			// Not enough left: this caller takes the next lease.
			ls.taking = newLeaseTake()
			t.mu.Unlock()
			return l.takeLease(ctx, t, ls, key, cost, limit)
		}
	}
}

// insert adds a lease, first dropping ended ones when the table has grown
// (amortised: a sweep each time it doubles), and the least recently used
// eighth when it is full.
func (t *leaseTable) insert(id leaseID, ls *quotaLease, now time.Time) {
	if len(t.m) >= t.sweep || len(t.m) >= t.max {
		for k, v := range t.m {
			if v.ended(now) {
				delete(t.m, k)
			}
		}
		t.sweep = max(2*len(t.m), 1024)
	}
	if len(t.m) >= t.max {
		t.evict(t.max - t.max/8)
	}
	t.m[id] = ls
}

// evict drops the least recently used leases until at most keep are left;
// leases being taken stay (their takers and waiters hold them).
func (t *leaseTable) evict(keep int) {
	type entry struct {
		id   leaseID
		used time.Time
	}
	idle := make([]entry, 0, len(t.m))
	for k, v := range t.m {
		if v.taking == nil {
			idle = append(idle, entry{k, v.used})
		}
	}
	slices.SortFunc(idle, func(a, b entry) int { return a.used.Compare(b.used) })
	for _, e := range idle {
		if len(t.m) <= keep {
			return
		}
		delete(t.m, e.id)
	}
}

// takeLease takes units of limit's quota for key from Redis and admits the
// call from them. ls is marked taking; the waiting callers are woken
// whatever happens. A call whose lease Redis could not decide returns that
// outcome (the error, or the fail mode's Degraded Result), and the callers
// waiting for it fail on the same error, each in its own Limiter's fail
// mode: the lease's command may have run, and is never followed by
// another.
func (l *Limiter) takeLease(ctx context.Context, t *leaseTable, ls *quotaLease, key string, cost int64, limit Limit) (Result, error, bool) {
	mark := l.backs.mark()
	sent := t.now()
	answered := false
	defer func() {
		if !answered {
			// The strategy panicked: the lease's waiters must not wait
			// for good; they decide in Redis themselves.
			t.mu.Lock()
			ls.left, ls.leftUntil = 0, time.Time{}
			close(ls.taking.done)
			ls.taking = nil
			t.mu.Unlock()
		}
	}()
	res, err := l.decideDirect(ctx, key, t.units, false, []Limit{limit})
	answered = true
	took := t.now().Sub(sent)
	t.mu.Lock()
	tk := ls.taking
	defer func() {
		close(tk.done)
		ls.taking = nil
		t.mu.Unlock()
	}()
	switch {
	case err != nil || res.Degraded:
		// shared with the waiters, unless this caller's own context
		// ended it
		tk.failed, tk.cause = ctx.Err() == nil, err
		if err == nil {
			tk.cause = res.Cause
		}
		return res, err, true
	case !res.Allowed:
		// Less than a lease is left: what the old lease still holds is
		// used until its window ends, the rest goes to Redis one by one
		// until this window ends.
		ls.direct = true
		ls.directUntil = sent.Add(min(res.ResetAfter, limit.Period) - leaseMargin)
		if res.RetryAfter > 0 {
			ls.directUntil = sent.Add(res.RetryAfter - leaseMargin)
		}
		return Result{}, nil, false
	}
	// A new lease, maybe in a new window.
	ls.direct = false
	if !l.backs.clean(mark, l.keys.prefix, key) || ls.stale {
		// A Reset (or a return) ran meanwhile: the units may have been
		// counted in a counter it deleted; or another form of the named
		// limit counted in its key, which may end the window early. This
		// call was admitted before it; the rest of the lease is not used.
		ls.left, ls.leftUntil, ls.stale = 0, time.Time{}, false
		res.Limit = limit
		return res, nil, true
	}
	until := sent.Add(res.ResetAfter - leaseMargin)
	if d := until.Sub(ls.leftUntil); ls.left > 0 && sent.Before(ls.leftUntil) && d < limit.Period/2 && d > -limit.Period/2 {
		// The same window as the old lease's (their ends differ by less
		// than half a Period; windows differ by a whole one), whose units
		// are still good: they are kept beside the new ones, until the
		// earlier of the two ends (and with its call's round trip, for
		// ReturnLeases).
		ls.left += t.units - cost
		if until.Before(ls.leftUntil) {
			ls.leftUntil, ls.took = until, took
		}
	} else {
		// What the old lease held belongs to a window that is over.
		ls.left, ls.leftUntil, ls.took = t.units-cost, until, took
	}
	ls.remaining = res.Remaining
	ls.used = sent.Add(took)
	res.Limit = limit
	res.Remaining += ls.left
	res.Leased = true
	return res, nil, true
}

// forget drops prefix's leases of subject. A lease being renewed stays (its
// taker and waiters hold it) with nothing left: the units it held were
// counted in the counter being reset.
func (t *leaseTable) forget(prefix, subject string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, v := range t.m {
		if k.prefix != prefix || k.subject != subject {
			continue
		}
		if v.taking != nil {
			v.left, v.leftUntil = 0, time.Time{}
			continue
		}
		delete(t.m, k)
	}
}

// ReturnLeases gives the unused units of this process's quota leases back
// to the windows they were counted in, for other processes to admit:
// every lease that has admitted nothing for idle (all of them when idle is
// 0) and whose window is still open. Call it before a process stops, or
// now and then when subjects are leased in long windows. It returns the
// units given back; the error joins the calls Redis could not answer
// (their units are lost to every process until their windows end, as
// without a return). Each lease given back takes two round trips with a
// strategy that gives units back in a script (FixedWindow), a few more
// with WATCH and MULTI/EXEC (Bucketed, Optimistic).
//
// A unit goes back only to the window it was counted in, never to the
// window that follows it, so a return never over-admits (see giveBack for
// the proof). A Reset of the subject by this Limiter (or a With copy)
// gives back nothing of the window it deletes: a return that has not
// started when the Reset begins gives nothing back, and the Reset waits
// for one in flight. One case is beyond it: a window deleted early (Reset
// from another process, eviction) and counted anew less than the lease
// call's round trip plus 100 ms after the lease's window began (for a
// strategy whose keys name their windows, as Bucketed's, any time in the
// same window) cannot be told from it, and may get the units. Leases of a
// strategy that does not implement QuotaReturner keep their units until
// their windows end (it returns 0), as do windows shorter than twice the
// round trips involved plus 200 ms.
func (l *Limiter) ReturnLeases(ctx context.Context, idle time.Duration) (int64, error) {
	t := l.leases
	if t == nil {
		return 0, nil
	}
	rq, ok := l.strategy.(QuotaReturner)
	if !ok {
		return 0, nil
	}
	type unused struct {
		id    leaseID
		ls    *quotaLease
		units int64
		end   time.Time // the lease's end (leftUntil)
		took  time.Duration
		// the lease's key, and its Resets begun when the units were taken
		key    string
		resets uint64
	}
	var backs []unused
	// No decision of a returned subject that overlaps its return is
	// remembered by the deny cache or kept as a lease; the returned
	// subjects' denials are forgotten (the units they lacked may be back).
	defer func() {
		for _, b := range backs {
			l.backs.end(b.id.prefix, b.id.subject)
		}
	}()
	t.mu.Lock()
	now := t.now()
	for id, ls := range t.m {
		if ls.taking != nil || ls.left <= 0 || !now.Before(ls.leftUntil) || now.Sub(ls.used) < idle {
			continue
		}
		// The lease's own prefix: a copy made by With with another
		// prefix shares the table, and its leases were counted under it.
		keys, err := keyBuilder{prefix: id.prefix}.build(id.subject, []Limit{ls.limit}, nil)
		if err != nil {
			continue // (it was counted under this key: unreachable)
		}
		l.backs.begin(id.prefix, id.subject)
		backs = append(backs, unused{id, ls, ls.left, ls.leftUntil, ls.took, keys[0], l.backs.resetsOf(id.prefix, id.subject, keys[0])})
		ls.left = 0 // from now on, the next call takes a new lease
	}
	t.mu.Unlock()
	var total int64
	var errs []error
	for _, b := range backs {
		// until: the lease's end + leaseMargin, its call's sending + reset
		n, kept, err := l.giveBack(ctx, rq, b.id, b.ls.limit, b.key, b.units, b.end.Add(leaseMargin), b.took, b.resets)
		if kept {
			t.keep(b.id, b.ls, b.units, b.end)
		}
		if n > 0 {
			// (in this Limiter's deny cache and its With copies')
			l.backs.forgetDenials(b.id.prefix, b.id.subject)
		}
		total += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return total, fmt.Errorf("limiter: return leases: %w", errors.Join(errs...))
	}
	return total, nil
}

// keep gives a lease back the units ReturnLeases took from it and did not
// return (they are still counted in its window), when the lease is as it
// was then: no call has taken a new lease since, and no Reset forgot it.
func (t *leaseTable) keep(id leaseID, ls *quotaLease, units int64, end time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[id] == ls && ls.taking == nil && ls.left == 0 && ls.leftUntil.Equal(end) {
		ls.left = units
	}
}

// returnSlack is how much longer than the lease's own window may have left
// a window read by ReturnLeases may have and still be taken for it.
const returnSlack = 100 * time.Millisecond

// giveBack returns units of a lease to its window and reports how many
// went back. The lease's call was sent at s (in this process's clock),
// answered took later, and saw its window with reset left, so the window
// ends within [x+reset-1ms, x+reset] for an instant x in [s, s+took] of
// its execution; until is s+reset.
//
// The first call reads the key's window: its end on the server's clock
// and the time it has left, sent at u and answered e later. The lease's
// window has at most until-u+took+1ms left then (returnSlack more is
// allowed, for a server clock that runs slower than this process's, or
// not at all, as a test's). A window counted anew after it ended started
// after that end and has at least until+Period-u-e-1ms left. While
// took+e+returnSlack+1ms is under the Period (half of it, for room) the
// two cannot be mistaken: a reading of at most until-u+took+returnSlack is
// the lease's window, named by its end, and the second call gives the
// units back to the window that ends then, if it still does (it checks
// that on the server, to 2 ms). kept reports that the units are still
// counted in Redis, certainly: nothing was given back, and no call that
// might have was left unanswered.
//
// A Reset in this process of the lease's limit (its key) that began after
// resets were counted may have deleted the lease's window: then nothing is
// given back (a Reset waits for a return already sent).
func (l *Limiter) giveBack(ctx context.Context, rq QuotaReturner, id leaseID, limit Limit, key string, units int64, until time.Time, took time.Duration, resets uint64) (n int64, kept bool, err error) {
	keys := []string{key}
	u := l.leases.now()
	cctx, cancel := l.withTimeout(ctx)
	req := Request{Keys: keys, Limits: []Limit{limit}}
	end, left, err := rq.WindowEnd(cctx, l.st, req)
	cancel()
	e := l.leases.now().Sub(u)
	if err != nil {
		return 0, true, err // a read
	}
	if end <= 0 || left > until.Sub(u)+took+returnSlack || 2*(took+e+returnSlack+time.Millisecond) >= limit.Period {
		return 0, true, nil
	}
	if !l.backs.startReturn(id.prefix, id.subject, key, resets) {
		return 0, false, nil // reset: the units are no longer counted
	}
	req.Cost = units
	ok, err := func() (bool, error) {
		// (ended even if the strategy panics: a Reset waits for it)
		defer l.backs.endReturn(id.prefix, id.subject)
		cctx, cancel := l.withTimeout(ctx)
		defer cancel()
		return rq.ReturnQuota(cctx, l.st, req, end)
	}()
	if err != nil {
		return 0, false, err // it may have given them back
	}
	if !ok {
		return 0, true, nil
	}
	return units, false, nil
}
