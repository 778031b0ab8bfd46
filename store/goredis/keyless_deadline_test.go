package goredis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// TestKeylessReadAbandonedIsKnown: a TIME alone (Bucketed's clock read)
// changes nothing, so a deadline that ends it is a plain deadline, not an
// unknown outcome, with go-redis's defaults as with ContextTimeoutEnabled
// (with the defaults the adapter's own bound reported ErrUnknownOutcome).
func TestKeylessReadAbandonedIsKnown(t *testing.T) {
	s := redistest.StartServer(t)
	p := redistest.NewProxy(t, s.Addr())
	for name, opt := range map[string]*redis.Options{
		"defaults":    {Addr: p.Addr()},
		"recommended": {Addr: p.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true},
	} {
		t.Run(name, func(t *testing.T) {
			rdb := redis.NewClient(opt)
			t.Cleanup(func() { _ = rdb.Close() })
			st := goredis.New(rdb)
			if _, err := st.Do(context.Background(), store.Cmd{Name: "TIME"}); err != nil {
				t.Fatal(err)
			}
			p.Blackhole(true)
			defer p.Blackhole(false)
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, err := st.Do(ctx, store.Cmd{Name: "TIME"})
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, store.ErrUnknownOutcome) {
				t.Errorf("Do(TIME) on a blackholed server = %v; want context.DeadlineExceeded, not an unknown outcome (TIME changes nothing)", err)
			}
		})
	}
}
