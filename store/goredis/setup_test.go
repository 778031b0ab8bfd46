package goredis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// TestConnectionSetupErrors: a connection that cannot be set up (a wrong
// password) is reported as the server's refusal, on every strategy's path
// (a script, a transaction, a pipeline on a watched connection): never as
// a nil reply, and never as an unknown outcome, since nothing was sent.
func TestConnectionSetupErrors(t *testing.T) {
	s := redistest.StartServer(t, "--requirepass", "secret")
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), Password: "wrong", MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	st := goredis.New(rdb)
	for _, s := range []limiter.Strategy{strategy.NewFixedWindow(), strategy.NewBucketed(), strategy.NewOptimistic()} {
		lim, err := limiter.New(st, s)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := lim.Allow(ctx, "u", limiter.PerMinute(5))
		cancel()
		switch {
		case err == nil:
			t.Errorf("%T with a wrong password = %+v, no error", s, r)
		case errors.Is(err, store.ErrNil) || errors.Is(err, store.ErrUnknownOutcome) || !strings.Contains(err.Error(), "WRONGPASS"):
			t.Errorf("%T with a wrong password: %v; want the server's WRONGPASS, not a nil reply or an unknown outcome", s, err)
		}
	}
}
