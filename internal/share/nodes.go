package share

import (
	"context"
	"sync"
)

// maxNodes bounds the nodes a Nodes keeps a gate for.
const maxNodes = 1024

// Nodes holds a Gate per node of a Cluster, made on first use, so that the
// calls for one node share round trips apart from the others' (a silent
// node holds up only its own). It keeps at most 1024 gates; past that it
// starts afresh (nodes that left the Cluster; the calls in flight keep
// their gate). Make one with NewNodes.
type Nodes[T any] struct {
	n    int
	send func(ctx context.Context, batch []*Waiter[T])
	mu   sync.Mutex
	m    map[string]*Gate[T]
}

// NewNodes returns a Nodes whose gates are NewGate(n, send).
func NewNodes[T any](n int, send func(ctx context.Context, batch []*Waiter[T])) *Nodes[T] {
	return &Nodes[T]{n: n, send: send, m: map[string]*Gate[T]{}}
}

// Gate returns the gate of the node at addr.
func (ns *Nodes[T]) Gate(addr string) *Gate[T] {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	g := ns.m[addr]
	if g == nil {
		if len(ns.m) >= maxNodes {
			clear(ns.m)
		}
		g = NewGate(ns.n, ns.send)
		ns.m[addr] = g
	}
	return g
}
