package argcache

import (
	"strconv"
	"sync"
	"testing"
)

func TestCache(t *testing.T) {
	var c Cache[string]
	if _, ok := c.Get(7); ok {
		t.Fatal("an empty cache holds 7")
	}
	c.Put(7, "7")
	if s, ok := c.Get(7); !ok || s != "7" {
		t.Fatalf("Get(7) = %q, %v", s, ok)
	}
	// Two integers of one slot replace each other; neither is ever read
	// as the other.
	a, b := int64(1000), int64(1001)
	for slot(b) != slot(a) {
		b++
	}
	c.Put(a, "a")
	c.Put(b, "b")
	if _, ok := c.Get(a); ok {
		t.Errorf("%d still cached after %d took its slot", a, b)
	}
	if s, ok := c.Get(b); !ok || s != "b" {
		t.Errorf("Get(%d) = %q, %v", b, s, ok)
	}
	var nilCache *Cache[string]
	nilCache.Put(1, "x")
	if _, ok := nilCache.Get(1); ok {
		t.Error("a nil cache remembered something")
	}
}

func TestCacheConcurrent(t *testing.T) {
	var c Cache[string]
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 5000 {
				v := int64(i*7 + g)
				if s, ok := c.Get(v); ok && s != strconv.FormatInt(v, 10) {
					t.Errorf("Get(%d) = %q", v, s)
					return
				}
				c.Put(v, strconv.FormatInt(v, 10))
			}
		})
	}
	wg.Wait()
}

func TestBoxes(t *testing.T) {
	var b Boxes
	for _, v := range []int64{0, 255, 256, 1 << 40, -1} {
		if got := b.Box(v); got != any(v) {
			t.Errorf("Box(%d) = %#v", v, got)
		}
	}
	b.Box(1 << 40)
	if n := testing.AllocsPerRun(100, func() { _ = b.Box(1 << 40); _ = b.Box(1000) }); n != 0 {
		t.Errorf("boxing remembered integers allocates %.0f times", n)
	}
}
