package share

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// TestGateSlotHeldWhileOneWaits: of a shared round trip that does not
// return, one call gives up: the slot stays taken for the other, which
// still waits on it; it is freed once the round trip returns.
func TestGateSlotHeldWhileOneWaits(t *testing.T) {
	f := newFake(1)
	f.hold = make(chan struct{})
	if !f.g.TryAlone() {
		t.Fatal("no free slot")
	}
	ctx0, cancel0 := context.WithCancel(context.Background())
	defer cancel0()
	var wg sync.WaitGroup
	var err1 error
	done0 := make(chan error, 1)
	go func() { done0 <- f.g.Do(ctx0, &call{it: &item{id: 1}, alone: &f.alone}) }()
	waitUntil(t, "the first queued", func() bool { return f.g.Queued() == 1 })
	wg.Go(func() { err1 = f.g.Do(context.Background(), &call{it: &item{id: 2}, alone: &f.alone}) })
	waitUntil(t, "the second queued", func() bool { return f.g.Queued() == 2 })
	f.g.Leave()
	waitUntil(t, "the round trip out", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.sizes) == 1 })
	cancel0()
	err0 := <-done0
	if n := f.g.InFlight(); n != 1 {
		t.Errorf("one call of two gave up on a round trip still out: %d in flight; want 1", n)
	}
	close(f.hold)
	wg.Wait()
	if !errors.Is(err0, errUnknown) || err1 != nil {
		t.Errorf("calls = %v, %v; want unknown, nil", err0, err1)
	}
	waitUntil(t, "the slot freed", func() bool { return f.g.InFlight() == 0 })
}

// TestGateFirstWaiterGivesUpRoundTripNeverReturns: the first of two
// queued calls gives up with the batch handed to it (it starts the round
// trip and leaves); then the other gives up too while the round trip never
// returns: every call gave up, so the slot is freed at once. (abandon is
// called directly: through Do, a waiter parked on its wake takes the batch
// before it sees its context end.)
func TestGateFirstWaiterGivesUpRoundTripNeverReturns(t *testing.T) {
	f := newFake(1)
	f.hold = make(chan struct{})
	defer close(f.hold)
	if !f.g.TryAlone() {
		t.Fatal("no free slot")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a, b := &call{it: &item{id: 1}, alone: &f.alone}, &call{it: &item{id: 2}, alone: &f.alone}
	wa, wb := f.g.enter(ctx, a), f.g.enter(ctx, b)
	if wa == nil || wb == nil {
		t.Fatal("calls not queued")
	}
	f.g.Leave() // the batch handed to a
	if err := f.g.abandon(ctx, wa, a); !errors.Is(err, errKnown) {
		t.Errorf("a = %v; want not sent", err)
	}
	waitUntil(t, "the round trip out", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.sizes) == 1 })
	if err := f.g.abandon(ctx, wb, b); !errors.Is(err, errUnknown) {
		t.Errorf("b = %v; want unknown", err)
	}
	if n := f.g.InFlight(); n != 0 {
		t.Errorf("every call gave up on a round trip that never returns: %d in flight; want 0", n)
	}
}
