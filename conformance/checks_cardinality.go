package conformance

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/quotagate/limiter"
)

const (
	// cardinalitySubjects is how many distinct subjects property 25 decides
	// once each: enough that a key or a per-subject allocation kept for
	// ever shows, few enough for a 2-core machine to do in seconds (a
	// quarter under the race detector, which slows each call tenfold).
	cardinalitySubjects = 10000 / cardinalityDiv / 8 * 8 // a multiple of the 8 workers
	// cardinalityHeap is how much the client's live heap may grow over
	// them. What a client's connections add after the warm-up must fit:
	// rueidis's on a Cluster, on a loaded machine, grew by 8 to 15 MiB in
	// some runs. Over 10 000 subjects it fails 3.3 KiB kept per subject
	// (13 KiB over the 2 496 under the race detector; 330 bytes over
	// Cardinality(100000), which each adapter runs).
	cardinalityHeap = 32 << 20
	// virtualCardinalitySubjects is how many subjects property 25 decides
	// on a server with a virtual clock (an embedded one).
	virtualCardinalitySubjects = 400
)

// Cardinality returns property 25 (cardinality-bounded) deciding n
// distinct subjects instead of the suite's default of 10 000 (2 500 under
// the race detector, 400 on a server with a virtual clock): for a store's
// own test that proves its client holds nothing per subject over a
// production-sized key space, e.g.
//
//	conformance.RunCheck(t, conformance.RedisServer(dial), conformance.FixedWindow(), conformance.Cardinality(100000))
//
// n is rounded down to a multiple of the check's 8 workers (at least 8).
func Cardinality(n int) Check {
	n = max(n/8*8, 8)
	return Check{ID: 25, Name: fmt.Sprintf("cardinality-bounded-%d", n), run: func(c *checker) { cardinality(c, n) }}
}

func checkCardinality(c *checker) {
	n := cardinalitySubjects
	if c.h.Caps().VirtualClock {
		// Beside an embedded server the heap is not measured (its memory
		// is in this process's heap too): what remains to prove is that
		// every key goes, which a few hundred subjects show as surely as
		// thousands, at a fraction of the embedded server's time.
		n = virtualCardinalitySubjects
	}
	cardinality(c, n)
}

// Property 25: cardinality is bounded. Many distinct subjects with 1 s
// windows, each decided once: shortly after the window every key is gone
// (SCAN finds none under the prefix), and the client's live heap is back
// near where it began.
func cardinality(c *checker, subjects int) {
	l := limiter.PerSecond(1)
	c.window(l)
	lim := c.limiter(nil)
	const workers = 8
	// The heap is measured beside a server in another process only.
	measureHeap := !c.h.Caps().VirtualClock
	if measureHeap {
		// A warm-up with the same concurrency grows the client's
		// connection pools (rueidis keeps a buffer of about 1 MiB per
		// connection) before the heap is measured: what is measured is
		// what the subjects add.
		_, _, warmErrs := hammer(workers, 100, func(w, i int) (limiter.Result, error) {
			return c.underLoad(func(ctx context.Context) (limiter.Result, error) {
				return lim.Allow(ctx, fmt.Sprintf("p25-warm-%d-%d", w, i), l)
			})
		})
		c.unknownOutcomes("property 25: warm-up", workers*100, warmErrs)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	per := subjects / workers
	allowed, _, errs := hammer(workers, per, func(w, i int) (limiter.Result, error) {
		return c.underLoad(func(ctx context.Context) (limiter.Result, error) {
			return lim.Allow(ctx, fmt.Sprintf("p25-%d-%d", w, i), l)
		})
	})
	unknown := c.unknownOutcomes("property 25", subjects, errs)
	// A subject decided once in a fresh window is admitted (Bucketed: unless
	// its aligned window ended between its read and its write).
	if !c.spec.Aligned && allowed+unknown != int64(subjects) {
		c.t.Errorf("property 25: %d of %d fresh subjects admitted (and %d unknown outcomes)", allowed, subjects, unknown)
	}
	c.h.Advance(c.spec.life(l.Period) + time.Second)
	var left []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if left = c.keys(); len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		c.t.Errorf("property 25: %d keys of %d subjects with 1s windows remain well after their window, e.g. %q", len(left), subjects, left[0])
	}
	if !measureHeap {
		// the embedded server's memory is in this process's heap too
		c.t.Logf("property 25: the client's heap is not measured beside an embedded server")
		return
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	c.t.Logf("property 25: live heap %+d KiB over %d subjects", grew>>10, subjects)
	if grew > cardinalityHeap {
		c.t.Errorf("property 25: the live heap grew by %d KiB over %d subjects (at most %d KiB): something is kept per subject", grew>>10, subjects, cardinalityHeap>>10)
	}
}
