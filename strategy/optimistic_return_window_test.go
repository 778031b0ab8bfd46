package strategy_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// TestOptimisticReturnNamesItsWindow: Optimistic gives units back only to
// the window whose end the return names (the key's expiry within 2 ms of
// it, either side): a return named for an earlier window, or a later one,
// writes nothing. On miniredis and on a redis-server.
func TestOptimisticReturnNamesItsWindow(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) *redis.Client{
		"miniredis": func(t *testing.T) *redis.Client {
			m, _ := newMini(t)
			rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
			t.Cleanup(func() { _ = rdb.Close() })
			return rdb
		},
		"redis-server": realServer,
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			rdb := open(t)
			st := goredis.New(rdb)
			o := strategy.NewOptimistic()
			l := limiter.PerHour(100)
			if r, err := newLim(t, st, o).AllowN(ctx, "s", 3, l); err != nil || !r.Allowed {
				t.Fatalf("AllowN(3) = %+v, %v", r, err)
			}
			key, _ := limiter.Key("t", "s", l)
			at := func(units int64) limiter.Request {
				return limiter.Request{Keys: []string{key}, Limits: []limiter.Limit{l}, Cost: units}
			}
			end, _, err := o.WindowEnd(ctx, st, at(0))
			if err != nil || end <= 0 {
				t.Fatalf("WindowEnd = %d, %v; want the window's end", end, err)
			}
			for _, e := range []int64{end - 3, end + 3, end + 60_000} {
				if ok, err := o.ReturnQuota(ctx, st, at(1), e); err != nil || ok {
					t.Errorf("ReturnQuota named for the window ending %+d ms from the key's = %v, %v; want refused", e-end, ok, err)
				}
				if c := rdb.Get(ctx, key).Val(); c != "3" {
					t.Fatalf("counter %q after a refused return, want 3", c)
				}
			}
			for _, e := range []int64{end + 2, end - 2} {
				if ok, err := o.ReturnQuota(ctx, st, at(1), e); err != nil || !ok {
					t.Errorf("ReturnQuota named for the window's end %+d ms = %v, %v; want given back", e-end, ok, err)
				}
			}
			if c := rdb.Get(ctx, key).Val(); c != "1" {
				t.Errorf("counter %q after two returns of 1, want 1", c)
			}
		})
	}
}
