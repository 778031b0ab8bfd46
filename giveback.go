package limiter

import (
	"context"
	"sync"
	"sync/atomic"
	"weak"
)

// giveBacks tracks, subject by subject, the calls that give quota back
// early in this process (Reset, ReturnLeases) while they run, so that a
// decision of a subject that overlapped one of that subject's is neither
// remembered by the deny cache nor kept as a lease: it may have read a
// count the give-back then changed. A give-back of one subject does not
// touch another's decisions.
type giveBacks struct {
	epoch   atomic.Uint64 // moved at each give-back's start and end
	running atomic.Int64  // give-backs in progress

	mu sync.Mutex
	// the subjects being given back, and those whose last give-back ended
	// recently (once more than keptGiveBacks are kept, the ended ones are
	// dropped at the next end)
	subjects map[subjectID]*giveBack
	// a decision marked before floor may have overlapped a give-back no
	// longer kept: it is not clean
	floor uint64
	// the deny caches and lease tables of a Limiter and of its With
	// copies, which share its giveBacks and its counters: a give-back
	// forgets its subject in every one. Held weakly, so that copies made
	// and dropped (a With per request) are not kept alive.
	denies []weak.Pointer[denyCache]
	tables []weak.Pointer[leaseTable]
	// hasTables: a lease table was registered (the calls of every
	// Limiter sharing g then note their forms in them: flights)
	hasTables atomic.Bool
}

// register adds a Limiter's deny cache and lease table (either may be nil)
// to those its give-backs forget subjects in.
func (g *giveBacks) register(d *denyCache, t *leaseTable) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if d != nil {
		g.denies = addWeak(g.denies, d)
	}
	if t != nil {
		g.tables = addWeak(g.tables, t)
		g.hasTables.Store(true)
	}
}

// flights notes a call about to count in limits' keys in every registered
// lease table (leaseTable.begin: a Limiter without leases of its own may
// share its counters with a With copy that has them), and returns the func
// that removes the notes once the call has its answer; nil when no table
// was registered.
func (g *giveBacks) flights(prefix, subject string, limits []Limit) (end func()) {
	if !g.hasTables.Load() {
		return nil
	}
	g.mu.Lock()
	ts := liveValues(g.tables)
	g.mu.Unlock()
	for _, t := range ts {
		t.begin(prefix, subject, limits)
	}
	return func() {
		for _, t := range ts {
			t.end(prefix, subject, limits)
		}
	}
}

// addWeak returns ps with p added unless it is there, and without the
// pointers whose values are gone.
func addWeak[T any](ps []weak.Pointer[T], p *T) []weak.Pointer[T] {
	wp := weak.Make(p)
	live := ps[:0]
	found := false
	for _, q := range ps {
		if q.Value() == nil {
			continue
		}
		found = found || q == wp
		live = append(live, q)
	}
	clear(ps[len(live):])
	if !found {
		live = append(live, wp)
	}
	return live
}

// liveValues returns the values of ps that are not gone.
func liveValues[T any](ps []weak.Pointer[T]) []*T {
	out := make([]*T, 0, len(ps))
	for _, q := range ps {
		if v := q.Value(); v != nil {
			out = append(out, v)
		}
	}
	return out
}

// forgetDenials forgets prefix's subject in every registered deny cache,
// outside g's lock: a cache's lock is taken before g's (clean), never
// after.
func (g *giveBacks) forgetDenials(prefix, subject string) {
	g.mu.Lock()
	ds := liveValues(g.denies)
	g.mu.Unlock()
	for _, d := range ds {
		d.forget(prefix, subject)
	}
}

// forgetLeases forgets prefix's subject in every registered lease table.
func (g *giveBacks) forgetLeases(prefix, subject string) {
	g.mu.Lock()
	ts := liveValues(g.tables)
	g.mu.Unlock()
	for _, t := range ts {
		t.forget(prefix, subject)
	}
}

// subjectID names a subject under a prefix.
type subjectID struct{ prefix, subject string }

// giveBack is one subject's give-backs: how many run, and the epoch at
// which the last one ended.
type giveBack struct {
	running int
	end     uint64
	// unsettled counts the Resets among running that returned without
	// knowing whether their deletion ran (store.ErrUnknownOutcome): it may
	// still reach Redis, and delete a counter a decision made since counted
	// in. They run on until a Reset of the subject ends with its deletion
	// done (endReset).
	unsettled int
	// resets counts, by limit key, the subject's Resets begun while the
	// entry is kept (it is kept while any give-back of the subject runs).
	// returning counts the returns of its quota in flight; idle is closed
	// when the last of them ends, and is nil when none runs.
	resets    map[string]uint64
	returning int
	idle      chan struct{}
}

// keptGiveBacks is how many subjects' ended give-backs are kept for the
// decisions that were sent while they ran.
const keptGiveBacks = 64

// begin records that prefix's subject is being given back; the caller
// calls end with the same subject when it is done.
func (g *giveBacks) begin(prefix, subject string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.subjects == nil {
		g.subjects = map[subjectID]*giveBack{}
	}
	id := subjectID{prefix, subject}
	b := g.subjects[id]
	if b == nil {
		b = new(giveBack)
		g.subjects[id] = b
	}
	b.running++
	g.running.Add(1)
	g.epoch.Add(1)
}

// end records that a give-back of prefix's subject is over.
func (g *giveBacks) end(prefix, subject string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.subjects[subjectID{prefix, subject}]
	b.running--
	b.end = g.epoch.Add(1)
	g.running.Add(-1)
	if len(g.subjects) <= keptGiveBacks {
		return
	}
	for id, b := range g.subjects {
		if b.running == 0 {
			g.floor = max(g.floor, b.end)
			delete(g.subjects, id)
		}
	}
}

// endReset records that a Reset of prefix's subject is over: deleted
// reports that its deletion ran, or was refused, and is done; it then
// ends the subject's unsettled Resets too. A Reset whose deletion may
// have run without its reply (store.ErrUnknownOutcome) may still reach
// Redis: it stays running, unsettled, and no decision of the subject is
// remembered by a deny cache or kept as a lease until a Reset of the
// subject ends with deleted.
func (g *giveBacks) endReset(prefix, subject string, deleted bool) {
	if deleted {
		g.mu.Lock()
		b := g.subjects[subjectID{prefix, subject}]
		n := b.unsettled
		b.unsettled, b.running = 0, b.running-n
		g.running.Add(int64(-n))
		g.mu.Unlock()
		g.end(prefix, subject)
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.subjects[subjectID{prefix, subject}].unsettled++
	g.epoch.Add(1)
}

// mark is read before a decision is sent.
func (g *giveBacks) mark() uint64 { return g.epoch.Load() }

// clean reports that no give-back of prefix's subject ran at any time
// since mark m. It is called under the lock of the table the decision is
// kept in, which a give-back takes after begin to forget the subject's
// entries: an entry kept after a clean check is forgotten by that
// give-back.
func (g *giveBacks) clean(m uint64, prefix, subject string) bool {
	if g.running.Load() == 0 && g.epoch.Load() == m {
		return true // none began since m, none runs
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if m < g.floor {
		return false
	}
	b := g.subjects[subjectID{prefix, subject}]
	return b == nil || b.running == 0 && b.end <= m
}

// resetsOf returns how many Resets of prefix's subject that named the
// limit whose key is key have begun. It is called between a give-back's
// begin and end, which keep the count.
func (g *giveBacks) resetsOf(prefix, subject, key string) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.subjects[subjectID{prefix, subject}].resets[key]
}

// startReturn reports whether no Reset of the limit whose key is key has
// begun since resetsOf returned resets; if so it records a return of the
// subject's quota in flight, which the caller ends with endReturn. A Reset
// that began since may have deleted the window the return read, and the
// one counted anew after it must not lose the returned units.
func (g *giveBacks) startReturn(prefix, subject, key string, resets uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.subjects[subjectID{prefix, subject}]
	if b.resets[key] != resets {
		return false
	}
	if b.returning == 0 {
		b.idle = make(chan struct{})
	}
	b.returning++
	return true
}

// endReturn ends a return recorded by startReturn.
func (g *giveBacks) endReturn(prefix, subject string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.subjects[subjectID{prefix, subject}]
	if b.returning--; b.returning == 0 {
		close(b.idle)
		b.idle = nil
	}
}

// resetting counts a Reset of prefix's subject's limits whose keys are
// keys, between its begin and end, so that no return of their quota starts
// after it, and waits until the subject's returns already in flight have
// ended (or ctx has): a return the Reset's deletion overtook could land in
// the window counted anew.
func (g *giveBacks) resetting(ctx context.Context, prefix, subject string, keys []string) error {
	g.mu.Lock()
	b := g.subjects[subjectID{prefix, subject}]
	if b.resets == nil {
		b.resets = make(map[string]uint64, len(keys))
	}
	for _, k := range keys {
		b.resets[k]++
	}
	idle := b.idle
	g.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
