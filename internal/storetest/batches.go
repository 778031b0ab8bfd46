package storetest

import (
	"context"
	"sync/atomic"

	"github.com/quotagate/limiter/store"
)

// Batches counts the batches a store.Batcher is sent and the commands in
// them. Its OneServer says One (so a test chooses whether AllowMany packs
// its calls), and Before, when set, runs before each batch goes on (a test
// moving a server's clock, say).
type Batches struct {
	store.Store
	One    bool
	Before func()

	batches, cmds atomic.Int64
}

// OneServer implements store.OneServer.
func (b *Batches) OneServer() bool { return b.One }

// Batch implements store.Batcher: counted, then sent on.
func (b *Batches) Batch(ctx context.Context, cmds []store.Cmd) []store.Reply {
	b.batches.Add(1)
	b.cmds.Add(int64(len(cmds)))
	if b.Before != nil {
		b.Before()
	}
	return b.Store.(store.Batcher).Batch(ctx, cmds)
}

// BatchCount returns the batches counted so far.
func (b *Batches) BatchCount() int64 { return b.batches.Load() }

// CmdCount returns the commands counted so far, in all batches.
func (b *Batches) CmdCount() int64 { return b.cmds.Load() }

// Zero starts the counts again.
func (b *Batches) Zero() { b.batches.Store(0); b.cmds.Store(0) }
