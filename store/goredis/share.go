package goredis

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/share"
	"github.com/quotagate/limiter/store"
)

// DefaultSharedPipelines is how many round trips of script calls a Store
// keeps in flight at most, on a *redis.Client and per master of a
// *redis.ClusterClient, before further calls share them (see
// WithSharedPipelines).
const DefaultSharedPipelines = 2

// WithSharedPipelines sets how many script calls' round trips may be in
// flight at once before further calls share them, on a *redis.Client (one
// server, or a failover client) and per master on a *redis.ClusterClient
// (each master's calls apart, so that a silent master holds up only its
// own; a call whose master cannot be looked up in the client's slot map,
// or not before its context ends, goes alone): a call that finds fewer
// than n in flight
// goes at once on its own connection, as it would without sharing; one
// that finds n waits, with the others that arrive meanwhile, for the first
// of them to return, and they then leave together in one pipeline. So a
// lone caller waits for nothing, and under load the decisions of many
// goroutines share a round trip: fewer system calls and less of the
// server's time per decision, more decisions per second. n ≤ 0 turns
// sharing off (every call on its own connection). The default is
// DefaultSharedPipelines. It changes nothing on a Ring or with
// WithAutoPipeline.
//
// Each call keeps its own outcome and its own deadline: a call whose
// context ends while it waits to leave is not sent (a known outcome); one
// whose context ends after its pipeline left is abandoned as
// store.ErrUnknownOutcome when it was written, as any call. A pipeline
// waits for its replies until the latest deadline of its calls (go-redis's
// ReadTimeout when one has none, or without ContextTimeoutEnabled) and
// carries the context values of the call that sends it, for go-redis's
// hooks. A pipeline all of whose calls have given up no longer counts
// against n, even if its reply never comes.
func WithSharedPipelines(n int) Option {
	return func(s *Store) { s.shareN = n }
}

// gate shares round trips of script calls (the calls' *redis.Cmd).
type gate = share.Gate[*redis.Cmd]

// runShared sends a script call through g: alone when a round trip is
// free, else in the next shared pipeline. It returns when cmd has its
// reply, or an error when the caller's context ended first.
func (s *Store) runShared(ctx context.Context, g *gate, call *evalCall, cmd *redis.Cmd) error {
	call.s, call.cmd = s, cmd
	return g.Do(ctx, call)
}

// Queue implements share.Call: a queued call's command.
func (c *evalCall) Queue() *redis.Cmd {
	// Shared, a sealed call is sent as one the server refuses, not as a
	// write that fails its whole pipeline.
	c.g.shared = true
	return c.cmd
}

// Alone implements share.Call: the call on its own.
func (c *evalCall) Alone(ctx context.Context) error { return c.s.send(ctx, c, c.cmd) }

// Seal implements share.Call.
func (c *evalCall) Seal() bool { return c.g.seal() }

// GaveUp implements share.Call.
func (c *evalCall) GaveUp(ctx context.Context, sent bool) error {
	err := c.s.dials.explain(ctx.Err())
	if sent {
		return fmt.Errorf("goredis: %w: %w: %w", store.ErrUnknownOutcome, errAbandoned, err)
	}
	return fmt.Errorf("goredis: %w: %w", errAbandoned, err)
}

// sendShared sends batch in one pipeline. The pipeline waits until the
// latest of its calls' deadlines, each call leaving at its own.
func (s *Store) sendShared(ctx context.Context, batch []*share.Waiter[*redis.Cmd]) {
	if !s.enforce { // (without ContextTimeoutEnabled go-redis ignores it)
		if dl, ok := share.Latest(batch); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, dl)
			defer cancel()
		}
	}
	p := s.c.Pipeline()
	for _, w := range batch {
		_ = p.Process(ctx, w.Item)
	}
	_, execErr := p.Exec(ctx)
	for _, w := range batch {
		if v, err := w.Item.Result(); v == nil && err == nil {
			// never processed: the pipeline failed before it
			if execErr == nil {
				execErr = errors.New("no reply")
			}
			w.Item.SetErr(execErr)
		}
	}
}

// nodeSharing shares pipelines per master of a ClusterClient.
type nodeSharing struct {
	cc    *redis.ClusterClient
	gates *share.Nodes[*redis.Cmd]
	// mapped is set once a lookup succeeded: the client has its slot
	// map, and later lookups send nothing (go-redis reloads it in the
	// background)
	mapped atomic.Bool
}

// sharingFor returns the gate that a script call on keys under ctx
// takes part in, or nil when it goes alone. On a ClusterClient, the
// gate of its first key's master, looked up in the client's slot map.
// Until a lookup has succeeded, one may load the map from the Cluster: it
// is bounded by ctx where go-redis would not bound it (see bounds), as
// Batch's is.
func (s *Store) sharingFor(ctx context.Context, keys []string) *gate {
	if s.sh != nil || s.nodes == nil {
		return s.sh
	}
	if len(keys) == 0 {
		return nil
	}
	n := s.nodes
	var m *redis.Client
	var err error
	lookup := func() { m, err = n.cc.MasterForKey(ctx, keys[0]) }
	if n.mapped.Load() || !s.bounds(ctx) {
		lookup()
	} else if s.boundedAlways(ctx, func() bool { return true }, lookup) != nil {
		return nil // ctx ended first: the call alone reports it, unsent
	}
	if err != nil {
		return nil // the call alone meets the failure and reports it
	}
	n.mapped.Store(true)
	return n.gates.Gate(m.Options().Addr)
}
