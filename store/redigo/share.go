package redigo

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/mna/redisc"

	"github.com/quotagate/limiter/internal/share"
)

// DefaultSharedPipelines is how many round trips of script calls a Store
// keeps in flight at most on one server before further calls share them
// (see WithSharedPipelines).
const DefaultSharedPipelines = 2

// Option configures a Store.
type Option func(*Store)

// WithSharedPipelines sets how many script calls' round trips may be in
// flight at once, on one server and per master of a Cluster, before
// further calls share them: a call that finds fewer than n in flight goes
// at once on a connection of its own, as without sharing; one that finds
// n waits, with the others that arrive meanwhile, for the first of them to
// return, and they then leave together in one pipeline on one connection.
// So a lone caller waits for nothing, and under load the decisions of many
// goroutines share a round trip. n ≤ 0 turns sharing off. The default is
// DefaultSharedPipelines.
//
// On a Cluster, calls share once the Store knows which master serves each
// slot (it reads the map in the background when a call finds it unknown,
// and again after a redirection; until then calls go alone), each
// master's calls apart, so that a silent master holds up only its own. A
// shared call that a node refuses with MOVED or ASK (it did not run)
// follows the redirection alone.
//
// Each call keeps its own deadline and outcome: a call whose context ends
// before its pipeline is written is not sent (a known outcome); one whose
// context ends after is store.ErrUnknownOutcome. A pipeline reads its
// replies until the latest deadline of its calls (the connection's read
// timeout when one has none) and carries the context values of the call
// that sends it. A pipeline all of whose calls have given up no longer
// counts against n, even if its reply never comes.
func WithSharedPipelines(n int) Option {
	return func(s *Store) { s.shareN = n }
}

// Call states: a queued call is written at most once, and a call given up
// on before it was written is never written.
const (
	callFresh int32 = iota
	callWritten
	callSealed
)

// sharedCall is a script call that shares round trips, and its reply.
type sharedCall struct {
	s     *Store
	key   string
	name  string
	args  []any
	state atomic.Int32
	// v is the raw reply (a redis.Error reply as the value), or err the
	// failed round trip's error, sent whether the command may have been
	// written first.
	v    any
	err  error
	sent bool
	// alone: the call went on a connection of its own (and followed
	// any redirection there)
	alone bool
}

// Queue implements share.Call.
func (c *sharedCall) Queue() *sharedCall { return c }

// Alone implements share.Call: the call on a connection of its own.
func (c *sharedCall) Alone(ctx context.Context) error {
	v, err := c.s.call(ctx, c.key, c.name, c.args)
	c.v, c.alone = v, true
	return err
}

// Seal implements share.Call.
func (c *sharedCall) Seal() bool {
	return c.state.CompareAndSwap(callFresh, callSealed) || c.state.Load() == callSealed
}

// GaveUp implements share.Call.
func (c *sharedCall) GaveUp(ctx context.Context, sent bool) error {
	return fail(ctx, ctx.Err(), sent)
}

// script sends a script call: through a gate when it shares round trips
// (the Store's, or its key's master's on a Cluster), else on a connection
// of its own.
func (s *Store) script(ctx context.Context, key, name string, args []any) (any, error) {
	g := s.gateFor(key)
	if g == nil {
		return s.call(ctx, key, name, args)
	}
	if g.TryAlone() {
		defer g.Leave()
		return s.call(ctx, key, name, args)
	}
	if err := ctx.Err(); err != nil {
		return nil, fail(ctx, err, false)
	}
	c := &sharedCall{s: s, key: key, name: name, args: args}
	if err := g.Do(ctx, c); err != nil {
		return nil, err
	}
	if c.err != nil {
		return nil, fail(ctx, c.err, c.sent)
	}
	if !c.alone {
		if next, again := s.redirect(0, hop{}, c.v); again {
			// refused, so not run: the map that put the call on this
			// master is out of date
			s.nodes.Store(nil)
			return s.callFrom(ctx, key, name, args, 1, next)
		}
	}
	return c.v, nil
}

// masterGates holds a Cluster's gates, one per master's address.
type masterGates struct {
	loading atomic.Bool // the slot map is being read
	gates   *share.Nodes[*sharedCall]
}

// gateFor returns the gate of a script call on key, or nil when it goes
// alone: a Store that does not share, a call without a key, and on a
// Cluster whose slot map is not known (which it then starts reading).
func (s *Store) gateFor(key string) *share.Gate[*sharedCall] {
	if s.masters == nil || key == "" {
		return s.gate
	}
	nodes := s.nodes.Load()
	if nodes == nil {
		s.loadNodes()
		return nil
	}
	return s.masters.gates.Gate(nodes[redisc.Slot(key)])
}

// loadNodes reads the Cluster's slot map in the background, unless that is
// under way: no call waits for it.
func (s *Store) loadNodes() {
	if !s.masters.loading.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.masters.loading.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s.slotNodes(ctx)
	}()
}

// sendShared sends batch in one pipeline on one connection and leaves each
// call's reply in it. Calls sealed before they were written are left out.
func (s *Store) sendShared(ctx context.Context, batch []*share.Waiter[*sharedCall]) {
	if dl, ok := share.Latest(batch); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl)
		defer cancel()
	}
	// (on a Cluster, bound to the master of the first call's key, which
	// all of them had when they were queued)
	conn, err := s.conn(ctx, batch[0].Item.key, hop{})
	if err != nil {
		for _, w := range batch {
			w.Item.err = err
		}
		return
	}
	defer conn.Close() // returns it to the pool, or discards it after an error
	written := make([]*sharedCall, 0, len(batch))
	for _, w := range batch {
		c := w.Item
		if err != nil {
			c.err = err // not reached: never written
			continue
		}
		if !c.state.CompareAndSwap(callFresh, callWritten) {
			continue // given up on before it was written: never sent
		}
		written = append(written, c)
		err = conn.Send(c.name, c.args...)
	}
	var raw []any
	if err == nil && len(written) > 0 {
		raw, err = receive(ctx, conn, len(written))
	}
	for i, c := range written {
		if err != nil {
			c.err, c.sent = err, true
			continue
		}
		c.v = raw[i]
	}
}
