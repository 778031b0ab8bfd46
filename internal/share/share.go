package share

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Gate shares round trips among concurrent calls. The zero value is not
// usable; make one with NewGate.
type Gate[T any] struct {
	mu    sync.Mutex
	busy  int // round trips in flight (alone or shared)
	max   int
	queue []*Waiter[T]
	// send sends a batch of two or more calls in one round trip, under a
	// context without the caller's end (see Latest), and leaves each
	// call's reply in its Item. It runs on a goroutine of its own.
	send func(ctx context.Context, batch []*Waiter[T])
}

// NewGate returns a Gate that keeps at most n round trips in flight and
// sends shared ones with send.
func NewGate[T any](n int, send func(ctx context.Context, batch []*Waiter[T])) *Gate[T] {
	return &Gate[T]{max: n, send: send}
}

// Waiter is a call queued to share a round trip.
type Waiter[T any] struct {
	// Item is the adapter's command and, once the round trip returns,
	// its reply.
	Item T
	// Deadline is the caller's context's deadline, zero for none.
	Deadline time.Time
	// wake receives the batch this call is to send (it is the first in
	// it), then nil once its reply is in Item; buffered so that neither
	// send waits for the caller, who may have left.
	wake chan []*Waiter[T]
	// fl is the round trip this call left in, set (under Gate.mu) when
	// the queue leaves.
	fl *flight
}

// flight is one shared round trip. Its slot is freed when it returns or
// when every one of its calls has given up on it, whichever comes first:
// a round trip that never returns (a server gone silent, with socket
// timeouts turned off) must not hold a slot after its callers left.
type flight struct {
	waiting atomic.Int32 // calls that have not given up
	freed   atomic.Bool
}

// free frees f's slot in g, once.
func free[T any](f *flight, g *Gate[T]) {
	if f.freed.CompareAndSwap(false, true) {
		g.Leave()
	}
}

// gaveUp records that one of f's calls gave up on it.
func gaveUp[T any](f *flight, g *Gate[T]) {
	if f.waiting.Add(-1) == 0 {
		free(f, g)
	}
}

// Call is what Do needs of an adapter's call.
type Call[T any] interface {
	// Queue returns the call's command as a Waiter's Item; Do calls it,
	// under the Gate's lock, when the call must queue.
	Queue() T
	// Alone sends the call by itself under ctx.
	Alone(ctx context.Context) error
	// Seal makes the queued call's command refuse to be written from now
	// on and reports whether it had not been written.
	Seal() bool
	// GaveUp is the error of a call whose ctx ended first: sent says
	// whether its command may have been written.
	GaveUp(ctx context.Context, sent bool) error
}

// Do runs one call through g: alone when a round trip is free, else in the
// next shared one. It returns nil once the call's reply is in its Item
// (or Alone's error), or GaveUp's error when ctx ended first.
func (g *Gate[T]) Do(ctx context.Context, c Call[T]) error {
	w := g.enter(ctx, c)
	if w == nil {
		defer g.Leave()
		return c.Alone(ctx)
	}
	for {
		select {
		case batch := <-w.wake:
			if batch == nil {
				return nil // the reply is in w.Item
			}
			if len(batch) == 1 {
				defer free(w.fl, g)
				return c.Alone(ctx)
			}
			go g.flush(ctx, batch)
		case <-ctx.Done():
			return g.abandon(ctx, w, c)
		}
	}
}

// TryAlone takes a slot and reports true when a round trip is free: the
// caller then sends its call alone, without Do, and calls Leave when it
// returns. It saves making a Call for the common case of a free slot.
func (g *Gate[T]) TryAlone() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.take()
}

// take takes a free slot, if there is one; g.mu is held.
func (g *Gate[T]) take() bool {
	if g.busy < g.max {
		g.busy++
		return true
	}
	return false
}

// enter takes a slot and returns nil when a call may go at once, alone;
// otherwise it queues the call's Waiter and returns it.
func (g *Gate[T]) enter(ctx context.Context, c Call[T]) *Waiter[T] {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.take() {
		return nil
	}
	w := &Waiter[T]{Item: c.Queue(), wake: make(chan []*Waiter[T], 1)}
	w.Deadline, _ = ctx.Deadline()
	g.queue = append(g.queue, w)
	return w
}

// Leave frees a slot (one TryAlone took, or Do's): the calls queued
// meanwhile take it, as the next round trip, sent by the first.
func (g *Gate[T]) Leave() {
	g.mu.Lock()
	if len(g.queue) == 0 {
		g.busy--
		g.mu.Unlock()
		return
	}
	next := g.queue
	g.queue = nil
	fl := &flight{}
	fl.waiting.Store(int32(len(next)))
	for _, w := range next {
		w.fl = fl
	}
	// Handed over before the lock is let go (wake has room: a queued
	// waiter has been sent nothing yet), so that a first waiter whose
	// context ends finds its batch, either still queued (withdraw) or in
	// wake, and never leaves it unsent with the others waiting.
	next[0].wake <- next
	g.mu.Unlock()
	if afterLeave != nil {
		afterLeave()
	}
}

// afterLeave, when set (by tests), runs when Leave has handed a batch over.
var afterLeave func()

// withdraw takes w out of the queue and reports whether it was still
// there (then it will never be sent).
func (g *Gate[T]) withdraw(w *Waiter[T]) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if i := slices.Index(g.queue, w); i >= 0 {
		g.queue = slices.Delete(g.queue, i, i+1)
		return true
	}
	return false
}

// flush sends batch, frees its slot and hands each call its reply. The
// round trip carries ctx's values but not its end.
func (g *Gate[T]) flush(ctx context.Context, batch []*Waiter[T]) {
	g.send(context.WithoutCancel(ctx), batch)
	free(batch[0].fl, g)
	for _, w := range batch {
		w.wake <- nil
	}
}

// abandon ends a queued call whose context ended before its reply came.
func (g *Gate[T]) abandon(ctx context.Context, w *Waiter[T], c Call[T]) error {
	if g.withdraw(w) {
		return c.GaveUp(ctx, false)
	}
	// Taken into a round trip: perhaps as the call that sends it.
	select {
	case batch := <-w.wake:
		if batch == nil {
			return nil // the reply came meanwhile
		}
		c.Seal() // it leaves with the others, refused unrun
		if len(batch) == 1 {
			free(w.fl, g)
		} else {
			go g.flush(ctx, batch)
			gaveUp(w.fl, g)
		}
		return c.GaveUp(ctx, false)
	default:
	}
	gaveUp(w.fl, g)
	if c.Seal() {
		return c.GaveUp(ctx, false)
	}
	return c.GaveUp(ctx, true)
}

// Latest returns the latest of batch's deadlines, or false when one of its
// calls has none.
func Latest[T any](batch []*Waiter[T]) (time.Time, bool) {
	var latest time.Time
	for _, w := range batch {
		if w.Deadline.IsZero() {
			return time.Time{}, false
		}
		if w.Deadline.After(latest) {
			latest = w.Deadline
		}
	}
	return latest, true
}

// Queued reports how many calls wait to share a round trip.
func (g *Gate[T]) Queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}

// InFlight reports how many round trips g counts in flight.
func (g *Gate[T]) InFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.busy
}
