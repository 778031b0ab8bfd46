package argcache

import "sync/atomic"

// Cache remembers one value of type T per integer, for the integers seen
// most recently. It is direct-mapped: each of its 256 slots holds the last
// integer that hashed to it, so it never grows, and two integers that share
// a slot replace each other. The zero value is ready to use and safe for
// concurrent use; a nil *Cache remembers nothing.
type Cache[T any] struct {
	slots [256]atomic.Pointer[entry[T]]
}

type entry[T any] struct {
	v int64
	t T
}

func slot(v int64) int { return int(uint64(v) * 0x9E3779B97F4A7C15 >> 56) }

// Get returns what is remembered for v.
func (c *Cache[T]) Get(v int64) (T, bool) {
	if c != nil {
		if e := c.slots[slot(v)].Load(); e != nil && e.v == v {
			return e.t, true
		}
	}
	var zero T
	return zero, false
}

// Put remembers t for v.
func (c *Cache[T]) Put(v int64, t T) {
	if c != nil {
		c.slots[slot(v)].Store(&entry[T]{v, t})
	}
}

// Boxes remembers integers boxed as interface values, so that the
// integers a caller passes again and again (a limit's rate and period) are
// boxed, and allocated, once. The zero value is ready to use.
type Boxes struct {
	c Cache[any]
}

// Box returns v as an interface value. Integers the runtime boxes without
// allocating (0 to 255) are not remembered.
func (b *Boxes) Box(v int64) any {
	if 0 <= v && v < 256 {
		return v
	}
	if a, ok := b.c.Get(v); ok {
		return a
	}
	a := any(v)
	b.c.Put(v, a)
	return a
}
