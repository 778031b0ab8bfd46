package conformance

import (
	"context"
	"strings"
	"testing"

	"github.com/quotagate/limiter/store"
)

// doubling runs every script call twice: each decision is counted twice,
// yet every call is decided by Redis.
type doubling struct{ store.Store }

func (d doubling) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	if _, err := d.Store.EvalSha(ctx, sha, keys, args); err != nil {
		return nil, err
	}
	return d.Store.EvalSha(ctx, sha, keys, args)
}

func (d doubling) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	if _, err := d.Store.Eval(ctx, src, keys, args); err != nil {
		return nil, err
	}
	return d.Store.Eval(ctx, src, keys, args)
}

// MigratingSlot promises "admits exactly 5 of 8 calls while the slot is
// being migrated": a store that counts each decision twice must fail it
// with the count message of decideCalls.
func TestMigratingSlotCatchesDoubleCounting(t *testing.T) {
	inner := goredisCluster(0)
	dial := func(ctx context.Context, addrs []string) (store.Store, func(), error) {
		st, closeSt, err := inner(ctx, addrs)
		if err != nil {
			return nil, nil, err
		}
		return doubling{st}, closeSt, nil
	}
	o := record(context.Background(), func(r testing.TB) { MigratingSlot(r, dial, goredisNode) })
	if o.Skipped {
		t.Fatalf("skipped: %v", o.Messages)
	}
	for _, m := range o.Messages {
		if strings.HasPrefix(m, "FixedWindow: ") && strings.Contains(m, "calls of") && strings.Contains(m, "admitted; want 5") {
			return
		}
	}
	t.Errorf("MigratingSlot did not report FixedWindow's double counting (admitted; want 5): %s", strings.Join(o.Messages, " | "))
}
