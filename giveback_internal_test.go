package limiter

import (
	"fmt"
	"runtime"
	"testing"
)

// TestGiveBacksBySubject: a decision is clean unless a give-back of its own
// subject ran at some time since its mark; the ended give-backs kept are
// bounded, and a mark older than those dropped is never clean.
func TestGiveBacksBySubject(t *testing.T) {
	var g giveBacks
	m0 := g.mark()
	if !g.clean(m0, "p", "a") {
		t.Fatal("no give-back ever ran: not clean")
	}
	g.begin("p", "a")
	m1 := g.mark()
	for _, c := range []struct {
		m       uint64
		subject string
		want    bool
	}{{m0, "a", false}, {m1, "a", false}, {m0, "b", true}, {m1, "b", true}} {
		if got := g.clean(c.m, "p", c.subject); got != c.want {
			t.Errorf("a's give-back running: clean(mark %d, %s) = %v; want %v", c.m, c.subject, got, c.want)
		}
	}
	if g.clean(m1, "q", "a") != true {
		t.Error("another prefix's a: not clean")
	}
	g.end("p", "a")
	m2 := g.mark()
	if g.clean(m1, "p", "a") || !g.clean(m2, "p", "a") {
		t.Errorf("a's give-back ended: clean from before its end %v, from after %v; want false, true", g.clean(m1, "p", "a"), g.clean(m2, "p", "a"))
	}
	// two at once of the same subject: clean only after both end
	g.begin("p", "c")
	g.begin("p", "c")
	g.end("p", "c")
	if g.clean(g.mark(), "p", "c") {
		t.Error("one of c's two give-backs still runs: clean")
	}
	g.end("p", "c")
	if !g.clean(g.mark(), "p", "c") {
		t.Error("both of c's give-backs ended: not clean")
	}
	for i := range 3 * keptGiveBacks {
		s := fmt.Sprint("s", i)
		g.begin("p", s)
		g.end("p", s)
	}
	if n := len(g.subjects); n > keptGiveBacks+1 {
		t.Errorf("%d subjects kept after %d give-backs ended; want at most %d", n, 3*keptGiveBacks, keptGiveBacks+1)
	}
	if g.clean(m2, "p", "b") {
		t.Error("a mark older than the give-backs dropped: clean")
	}
	if !g.clean(g.mark(), "p", "b") {
		t.Error("a mark after every give-back ended: not clean")
	}
}

// TestGiveBacksHoldCopiesWeakly: the deny caches and lease tables of With
// copies are registered for give-backs to forget subjects in, but not kept
// alive by it: a copy made per request and dropped is collected, and the
// registry stays as small as the copies alive.
func TestGiveBacksHoldCopiesWeakly(t *testing.T) {
	l := &Limiter{backs: new(giveBacks)}
	l.deny = newDenyCache(4)
	l.backs.register(l.deny, nil)
	for range 1000 {
		c := *l
		c.deny, c.leases = newDenyCache(4), &leaseTable{}
		c.backs.register(c.deny, c.leases)
		if len(c.backs.denies) > 50 {
			runtime.GC()
		}
	}
	runtime.GC()
	l.backs.register(l.deny, nil) // prunes what is gone
	if n := len(l.backs.denies); n != 1 {
		t.Errorf("%d deny caches registered after 1000 dropped copies; want 1 (the original's)", n)
	}
	l.backs.register(nil, &leaseTable{})
	if n := len(l.backs.tables); n > 1 {
		t.Errorf("%d lease tables registered; want at most 1", n)
	}
}
