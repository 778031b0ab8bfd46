package share

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// item is a fake command: its reply is set by the fake round trips.
type item struct {
	id     int
	reply  int
	sealed atomic.Bool
}

// call is a fake adapter call; Alone waits for release when it is set.
type call struct {
	it      *item
	release chan struct{}
	alone   *atomic.Int32
}

func (c *call) Queue() *item { return c.it }

func (c *call) Alone(context.Context) error {
	c.alone.Add(1)
	if c.release != nil {
		<-c.release
	}
	c.it.reply = c.it.id
	return nil
}

func (c *call) Seal() bool { return c.it.sealed.CompareAndSwap(false, true) }

var errKnown, errUnknown = errors.New("not sent"), errors.New("unknown")

func (c *call) GaveUp(_ context.Context, sent bool) error {
	if sent {
		return errUnknown
	}
	return errKnown
}

// fake is a Gate whose shared round trips record their sizes, write their
// calls, and wait for hold (when set) before they answer.
type fake struct {
	g     *Gate[*item]
	mu    sync.Mutex
	sizes []int
	hold  chan struct{}
	alone atomic.Int32
}

func newFake(n int) *fake {
	f := &fake{}
	f.g = NewGate(n, func(_ context.Context, batch []*Waiter[*item]) {
		f.mu.Lock()
		f.sizes = append(f.sizes, len(batch))
		f.mu.Unlock()
		var written []*item
		for _, w := range batch {
			// written, unless its caller sealed it: sealing fails from
			// now on
			if w.Item.sealed.CompareAndSwap(false, true) {
				written = append(written, w.Item)
			}
		}
		if f.hold != nil {
			<-f.hold
		}
		for _, it := range written {
			it.reply = it.id
		}
	})
	return f
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGateShares: with the only slot held by a lone call, the calls that
// arrive queue and then leave in one round trip, each with its reply;
// then the slot is free again.
func TestGateShares(t *testing.T) {
	f := newFake(1)
	release := make(chan struct{})
	var wg sync.WaitGroup
	first := &call{it: &item{id: 100}, release: release, alone: &f.alone}
	wg.Go(func() {
		if err := f.g.Do(context.Background(), first); err != nil || first.it.reply != 100 {
			t.Errorf("lone call = %v, reply %d", err, first.it.reply)
		}
	})
	waitUntil(t, "the lone call", func() bool { return f.alone.Load() == 1 })
	calls := make([]*call, 5)
	for i := range calls {
		calls[i] = &call{it: &item{id: i}, alone: &f.alone}
		wg.Go(func() {
			if err := f.g.Do(context.Background(), calls[i]); err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	waitUntil(t, "5 queued", func() bool { return f.g.Queued() == 5 })
	close(release)
	wg.Wait()
	for i, c := range calls {
		if c.it.reply != i {
			t.Errorf("call %d reply %d", i, c.it.reply)
		}
	}
	if !slices.Equal(f.sizes, []int{5}) || f.alone.Load() != 1 || f.g.InFlight() != 0 {
		t.Errorf("round trips %v shared, %d alone, %d in flight; want [5], 1, 0", f.sizes, f.alone.Load(), f.g.InFlight())
	}
}

// TestGateGiveUp: a queued call whose context ends is withdrawn (not
// sent); one whose round trip is out and written is an unknown outcome;
// a round trip whose calls all gave up frees its slot though it never
// returns.
func TestGateGiveUp(t *testing.T) {
	f := newFake(1)
	f.hold = make(chan struct{})
	defer close(f.hold)
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { _ = f.g.Do(context.Background(), &call{it: &item{}, release: release, alone: &f.alone}) })
	waitUntil(t, "the lone call", func() bool { return f.alone.Load() == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := f.g.Do(ctx, &call{it: &item{}, alone: &f.alone}); !errors.Is(err, errKnown) || f.g.Queued() != 0 {
		t.Fatalf("queued call past its deadline = %v, %d queued; want not sent, none", err, f.g.Queued())
	}

	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			errs[i] = f.g.Do(ctx, &call{it: &item{id: i}, alone: &f.alone})
		})
	}
	waitUntil(t, "2 queued", func() bool { return f.g.Queued() == 2 })
	close(release)
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, errUnknown) {
			t.Errorf("call %d in a round trip that never returns = %v; want unknown (written)", i, err)
		}
	}
	waitUntil(t, "the slot freed", func() bool { return f.g.InFlight() == 0 })
}

// TestGateLatest: the latest deadline of a batch, none when one has none.
func TestGateLatest(t *testing.T) {
	now := time.Now()
	a, b := &Waiter[int]{Deadline: now}, &Waiter[int]{Deadline: now.Add(time.Second)}
	if dl, ok := Latest([]*Waiter[int]{a, b}); !ok || !dl.Equal(now.Add(time.Second)) {
		t.Errorf("Latest = %v, %v", dl, ok)
	}
	if _, ok := Latest([]*Waiter[int]{a, {}}); ok {
		t.Error("Latest with a call without deadline reported one")
	}
}

// TestGateTryAlone: TryAlone takes the free slots, then refuses; Leave
// gives one back.
func TestGateTryAlone(t *testing.T) {
	g := NewGate[int](2, func(context.Context, []*Waiter[int]) {})
	if !g.TryAlone() || !g.TryAlone() || g.TryAlone() {
		t.Fatal("TryAlone on a gate of 2: want true, true, false")
	}
	g.Leave()
	if g.InFlight() != 1 || !g.TryAlone() {
		t.Errorf("after Leave: %d in flight, TryAlone refused", g.InFlight())
	}
}

func TestNodes(t *testing.T) {
	ns := NewNodes[int](2, func(context.Context, []*Waiter[int]) {})
	a, b := ns.Gate("a:1"), ns.Gate("b:1")
	if a == nil || a == b {
		t.Fatalf("gates of two nodes: %p, %p; want two", a, b)
	}
	if ns.Gate("a:1") != a {
		t.Fatal("a node's gate changed between calls")
	}
	// past 1024 nodes the map starts afresh: a node seen before gets a
	// new gate, and it stays the one for that node
	for i := range 1024 {
		ns.Gate(fmt.Sprint("n:", i))
	}
	again := ns.Gate("a:1")
	if again == a || ns.Gate("a:1") != again {
		t.Fatal("the map did not start afresh past 1024 nodes")
	}
}

// TestGateFirstWaiterGivesUpAtHandOver: the first of two queued calls, the
// one a freed slot hands the batch to, gives up (its context canceled)
// just as Leave hands the batch over; the other call, whose context never
// ends, is sent and answered. (The batch was handed over after Leave let
// go of its lock: a first waiter that gave up in between found neither its
// place in the queue nor the batch, the batch was never sent, and the
// other call waited forever with the slot taken.)
func TestGateFirstWaiterGivesUpAtHandOver(t *testing.T) {
	f := newFake(1)
	if !f.g.TryAlone() {
		t.Fatal("no free slot")
	}
	ctxA, cancelA := context.WithCancel(context.Background())
	a, b := &call{it: &item{id: 1}, alone: &f.alone}, &call{it: &item{id: 2}, alone: &f.alone}
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	go func() { doneA <- f.g.Do(ctxA, a) }()
	waitUntil(t, "a queued", func() bool { return f.g.Queued() == 1 })
	go func() { doneB <- f.g.Do(context.Background(), b) }()
	waitUntil(t, "b queued", func() bool { return f.g.Queued() == 2 })
	afterLeave = func() {
		cancelA()
		<-doneA // a gave up
	}
	defer func() { afterLeave = nil }()
	f.g.Leave()
	select {
	case err := <-doneB:
		if err != nil || b.it.reply != 2 {
			t.Errorf("b = %v, reply %d; want answered, 2", err, b.it.reply)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("b, whose context never ends, still waits 10 s after its batch was handed over (%d in flight)", f.g.InFlight())
	}
	waitUntil(t, "the slot freed", func() bool { return f.g.InFlight() == 0 })
}
