package limiter

import (
	"testing"
	"time"
)

// TestDenyCacheBounded: the cache holds at most its size, and CLOCK keeps
// an entry looked up since the hand last passed over one that was not.
func TestDenyCacheBounded(t *testing.T) {
	c := newDenyCache(8)
	now := time.Unix(1_000_000, 0)
	c.now = func() time.Time { return now }
	l := []Limit{PerMinute(1)}
	deny := Result{RetryAfter: time.Minute, ResetAfter: time.Minute}
	for i := range 100 {
		c.remember("p", string(rune('a'+i%26))+string(rune('a'+i/26)), 1, l, deny, c.now(), new(giveBacks), 0)
	}
	if n := c.len(); n != 8 {
		t.Fatalf("%d entries in a cache of 8", n)
	}
	c = newDenyCache(2)
	c.now = func() time.Time { return now }
	c.remember("p", "hot", 1, l, deny, c.now(), new(giveBacks), 0)
	c.remember("p", "cold", 1, l, deny, c.now(), new(giveBacks), 0)
	if _, ok := c.lookup("p", "hot", 1, l); !ok {
		t.Fatal("hot not found")
	}
	c.remember("p", "new", 1, l, deny, c.now(), new(giveBacks), 0) // evicts cold, not the looked-up hot
	if _, ok := c.lookup("p", "hot", 1, l); !ok {
		t.Error("the entry looked up was evicted")
	}
	if _, ok := c.lookup("p", "cold", 1, l); ok {
		t.Error("the entry not looked up was kept")
	}
	// RetryAfter counts down, and the entry ends with it.
	now = now.Add(59*time.Second + 500*time.Millisecond)
	if r, ok := c.lookup("p", "hot", 1, l); !ok || r.RetryAfter != 500*time.Millisecond || !r.Cached {
		t.Errorf("lookup 59.5s later = %+v, %v; want RetryAfter 500ms", r, ok)
	}
	now = now.Add(500 * time.Millisecond)
	if _, ok := c.lookup("p", "hot", 1, l); ok {
		t.Error("the entry outlived its RetryAfter")
	}
	// Another prefix, cost or limit is another request.
	c.remember("p", "x", 2, l, deny, c.now(), new(giveBacks), 0)
	for _, miss := range []func() bool{
		func() bool { _, ok := c.lookup("q", "x", 2, l); return ok },
		func() bool { _, ok := c.lookup("p", "x", 1, l); return ok },
		func() bool { _, ok := c.lookup("p", "x", 2, []Limit{PerMinute(2)}); return ok },
	} {
		if miss() {
			t.Error("a different request hit the cache")
		}
	}
	// A denial that can never fit is kept for at most maxNeverCached.
	c.remember("p", "never", 5, l, Result{RetryAfter: -1}, c.now(), new(giveBacks), 0)
	if r, ok := c.lookup("p", "never", 5, l); !ok || r.RetryAfter != -1 {
		t.Errorf("never = %+v, %v", r, ok)
	}
	now = now.Add(maxNeverCached)
	if _, ok := c.lookup("p", "never", 5, l); ok {
		t.Error("a never-fitting denial outlived maxNeverCached")
	}
}

// TestDenyCacheGrows: a cache's memory follows its entries, up to its
// size: a size of a billion costs nothing until used.
func TestDenyCacheGrows(t *testing.T) {
	c := newDenyCache(1 << 30)
	if n := cap(c.slots); n > 1024 {
		t.Fatalf("a new cache of 2^30 holds %d slots", n)
	}
	l := []Limit{PerMinute(1)}
	deny := Result{RetryAfter: time.Minute, ResetAfter: time.Minute}
	for i := range 3000 {
		c.remember("p", string(rune(0x4e00+i)), 1, l, deny, c.now(), new(giveBacks), 0)
	}
	if n, s := c.len(), len(c.slots); n != 3000 || s != 3000 {
		t.Fatalf("%d entries in %d slots after 3000 denials; want 3000 in 3000", n, s)
	}
	for i := range 3000 {
		if _, ok := c.lookup("p", string(rune(0x4e00+i)), 1, l); !ok {
			t.Fatalf("denial %d not found", i)
		}
	}
}
