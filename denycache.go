package limiter

import (
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"time"
)

// maxNeverCached bounds how long the deny cache remembers a denial whose
// cost can never fit (RetryAfter -1).
const maxNeverCached = time.Minute

// MaxTransientCached bounds how long the deny cache remembers a denial of
// a strategy whose denials may be transient (TransientDenials).
const MaxTransientCached = 100 * time.Millisecond

// TransientDenials is implemented by strategies that may deny a request
// whose quota is there, for as long as another request's cost is counted
// before it is taken back (one round trip): strategy.Bucketed counts
// first and takes a denied request's cost back in a second transaction.
// The deny cache remembers their denials for at most MaxTransientCached.
type TransientDenials interface {
	Strategy
	// TransientDenials marks the strategy; it is never called.
	TransientDenials()
}

// WithDenyCache makes the Limiter remember up to size denials in this
// process: once Redis denies a request with RetryAfter R, the same request
// (subject, cost and limits) made within R is denied here, without a round
// trip, with a RetryAfter that counts down to the same instant. A hot
// subject over its limit then costs Redis nothing until it could be
// admitted again.
//
// It never admits: its only answer is a denial that Redis gave for the
// same request and would give again, since until RetryAfter has passed the
// quota the request needs is not back, whatever other callers do.
// RetryAfter counts from when the request was sent (Redis measured it
// before its reply travelled back). The exceptions are a quota given back
// early in another process (Reset, ReturnLeases) or by hand, and a counter
// that requests with another form of the limit share, in this process or
// another (a rules reload: an unnamed limit of the same Period with
// another rate or burst, a named limit with another rate, burst or
// Period), whose decisions may give quota back (GCRA pulling the state
// back to a smaller burst) or end the window early (a shorter Period);
// then a request of the old form may be denied until its RetryAfter ends
// although Redis would admit it (a limit of 2/min changed to 2/s and back:
// for the rest of the minute). Never an admission. This process's Reset and ReturnLeases forget the subject's
// denials (in the deny caches of the Limiter and of every With copy of it
// or of its original), and a denial Redis made while one of them ran is not
// remembered. A denial that can never fit (RetryAfter -1) is remembered
// for at most a minute, one of a strategy whose denials may be transient
// (TransientDenials: Bucketed) for at most MaxTransientCached, and one
// with a Cause (not a lack of quota: ErrStaleWindow) not at all, nor a
// Peek's (it reports the state as it is, which, after a rule change, the
// next writing call repairs to the new rule first). A Peek is answered
// from the remembered denials of the calls that write.
//
// A remembered denial is a Result with Cached set; the observer is told it
// like any other. When full, the cache evicts with the CLOCK algorithm (an
// entry looked up since the hand last passed it is kept once more); its
// memory grows with its entries, up to size. size must be positive; 0 is
// ErrInvalidOption.
func WithDenyCache(size int) Option {
	return func(l *Limiter) error {
		if size <= 0 {
			return fmt.Errorf("%w: deny cache size %d must be positive", ErrInvalidOption, size)
		}
		l.deny = newDenyCache(size)
		if _, ok := l.strategy.(TransientDenials); ok {
			l.deny.most = MaxTransientCached
		}
		return nil
	}
}

// denyCache is a bounded map of remembered denials with CLOCK eviction.
type denyCache struct {
	seed maphash.Seed
	now  func() time.Time
	most time.Duration // how long an entry is kept at most; 0: its RetryAfter

	mu    sync.Mutex
	size  int            // the most entries
	index map[uint64]int // hash → slot
	slots []denyEntry    // grown as entries come, up to size
	hand  int
}

type denyEntry struct {
	used    bool // the slot holds an entry
	ref     bool // looked up since the hand last passed
	hash    uint64
	prefix  string
	subject string
	cost    int64
	limits  []Limit
	until   time.Time // RetryAfter's end (the app's monotonic clock)
	expires time.Time // when the entry is dropped: until, or sooner
	reset   time.Time // ResetAfter's end
	res     Result
}

func newDenyCache(size int) *denyCache {
	n := min(size, 1024) // a large size costs its memory only once used
	return &denyCache{seed: maphash.MakeSeed(), now: time.Now, size: size, index: make(map[uint64]int, n), slots: make([]denyEntry, 0, n)}
}

// hash returns the hash of a request.
func (c *denyCache) hash(prefix, subject string, cost int64, limits []Limit) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteString(prefix)
	_ = h.WriteByte(0)
	h.WriteString(subject)
	var b [8]byte
	put := func(v int64) {
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		_, _ = h.Write(b[:])
	}
	put(cost)
	for _, l := range limits {
		put(l.Rate)
		put(int64(l.Period))
		put(l.Burst)
		h.WriteString(l.Name)
		_ = h.WriteByte(0)
	}
	return h.Sum64()
}

// lookup returns the remembered denial of the request, if one is still
// running.
func (c *denyCache) lookup(prefix, subject string, cost int64, limits []Limit) (Result, bool) {
	h := c.hash(prefix, subject, cost, limits)
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.index[h]
	if !ok {
		return Result{}, false
	}
	e := &c.slots[i]
	if e.prefix != prefix || e.subject != subject || e.cost != cost || !slices.Equal(e.limits, limits) {
		return Result{}, false // a hash collision
	}
	now := c.now()
	if !now.Before(e.expires) {
		delete(c.index, h)
		*e = denyEntry{}
		return Result{}, false
	}
	e.ref = true
	r := e.res
	r.Cached = true
	if r.RetryAfter > 0 {
		r.RetryAfter = ceilMillis(e.until.Sub(now))
	}
	r.ResetAfter = max(ceilMillis(e.reset.Sub(now)), 0)
	return r, true
}

// remember stores a denial Redis made for a request sent at sent, unless a
// give-back of quota ran since mark m (see giveBacks). RetryAfter and
// ResetAfter count from sent: Redis measured them before its reply
// travelled back.
func (c *denyCache) remember(prefix, subject string, cost int64, limits []Limit, r Result, sent time.Time, g *giveBacks, m uint64) {
	now := sent
	wait := r.RetryAfter
	if wait < 0 {
		wait = maxNeverCached
	}
	if wait <= 0 || r.Cause != nil {
		return
	}
	expires := now.Add(wait)
	if c.most > 0 && c.most < wait {
		expires = now.Add(c.most)
	}
	h := c.hash(prefix, subject, cost, limits)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !g.clean(m, prefix, subject) {
		return
	}
	i, ok := c.index[h]
	if !ok {
		i = c.victim()
		if old := c.slots[i]; old.used {
			delete(c.index, old.hash)
		}
		c.index[h] = i
	}
	c.slots[i] = denyEntry{used: true, hash: h, prefix: prefix, subject: subject, cost: cost,
		limits: append([]Limit(nil), limits...), until: now.Add(wait), expires: expires, reset: now.Add(r.ResetAfter), res: r}
}

// victim returns the slot the next entry takes: a new one while there
// are fewer than size, then a free one, or the first not looked up since
// the hand last passed it.
func (c *denyCache) victim() int {
	if len(c.slots) < c.size {
		c.slots = append(c.slots, denyEntry{})
		return len(c.slots) - 1
	}
	for {
		e := &c.slots[c.hand]
		i := c.hand
		c.hand = (c.hand + 1) % len(c.slots)
		if !e.used || !e.ref {
			return i
		}
		e.ref = false
	}
}

// forget drops every entry of subject under prefix (Reset).
func (c *denyCache) forget(prefix, subject string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.slots {
		if e := &c.slots[i]; e.used && e.prefix == prefix && e.subject == subject {
			delete(c.index, e.hash)
			*e = denyEntry{}
		}
	}
}

// len returns the number of entries.
func (c *denyCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.index)
}

// ceilMillis rounds d up to a whole millisecond.
func ceilMillis(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}
