package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// cannedStore answers every script call with FixedWindow's common reply
// for one admitted limit of 2^40 per second (count 1, 1000 ms to the
// window's end, as one integer), to measure the client-side cost of a
// decision without I/O.
type cannedStore struct{}

// cannedReply is reset_ms·(2·rate+1) + count.
const cannedReply = 1000*(2<<40+1) + 1

func (cannedStore) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	return nil, store.ErrNotSupported
}
func (cannedStore) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	return int64(cannedReply), nil
}
func (cannedStore) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	return int64(cannedReply), nil
}
func (cannedStore) EvalShaInt64s(ctx context.Context, sha string, keys []string, args []int64, dst []int64) ([]int64, error) {
	return append(dst, cannedReply), nil
}
func (cannedStore) EvalInt64s(ctx context.Context, src string, keys []string, args []int64, dst []int64) ([]int64, error) {
	return append(dst, cannedReply), nil
}

// BenchmarkOverhead measures the client-side cost of one decision through
// the Limiter (validation, keys, strategy, reply binding) with a store
// that answers at once: what the Limiter adds to a client's own call.
//
//	go test -run '^$' -bench Overhead ./strategy/
func BenchmarkOverhead(b *testing.B) {
	overhead(b, cannedStore{}, strategy.NewFixedWindow())
}

// overhead runs one admitted decision per iteration through a Limiter of
// s on st, reporting allocations.
func overhead(b *testing.B, st store.Store, s limiter.Strategy) {
	lim, err := limiter.New(st, s)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	l := limiter.PerSecond(1 << 40)
	b.ReportAllocs()
	for b.Loop() {
		if r, err := lim.Allow(ctx, "user-01-1", l); err != nil || !r.Allowed {
			b.Fatal(r, err)
		}
	}
}

// BenchmarkOverheadDecide is BenchmarkOverhead for FixedWindow.Decide
// alone, without the Limiter.
func BenchmarkOverheadDecide(b *testing.B) {
	ctx := context.Background()
	fw := strategy.NewFixedWindow()
	req := limiter.Request{Keys: []string{"limiter:{user-01-1}:1000ms"}, Limits: []limiter.Limit{limiter.PerSecond(1 << 40)}, Cost: 1}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fw.Decide(ctx, cannedStore{}, req); err != nil {
			b.Fatal(err)
		}
	}
}

// alignedStore answers TIME with the app clock and every script call with
// AlignedWindow's common reply: an admitted count of 2, as the counter
// holds it (2^52 - 2).
type alignedStore struct{ cannedStore }

func (alignedStore) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	now := time.Now()
	return []store.Reply{{Val: []any{now.Unix(), int64(now.Nanosecond() / 1000)}}}, nil
}

func (alignedStore) EvalShaInt64s(ctx context.Context, sha string, keys []string, args []int64, dst []int64) ([]int64, error) {
	return append(dst, strategy.AlignedCountBase-2), nil
}

// BenchmarkOverheadAligned is BenchmarkOverhead for AlignedWindow.
func BenchmarkOverheadAligned(b *testing.B) {
	overhead(b, alignedStore{}, strategy.NewAlignedWindow())
}
