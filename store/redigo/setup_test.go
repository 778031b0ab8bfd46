package redigo_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/redigo"
	"github.com/quotagate/limiter/strategy"
)

// TestConnectionSetupErrors: a connection that cannot be set up (a wrong
// password) is reported as the server's refusal, on every strategy's path:
// never as a nil reply, and never as an unknown outcome, since nothing was
// sent.
func TestConnectionSetupErrors(t *testing.T) {
	s := redistest.StartServer(t, "--requirepass", "secret")
	nd := &net.Dialer{Timeout: time.Second}
	p := &redis.Pool{
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redigo.Dial(ctx, nd, "tcp", s.Addr(), redis.DialPassword("wrong"))
		},
		MaxActive: 4, MaxIdle: 4, Wait: true,
	}
	t.Cleanup(func() { _ = p.Close() })
	st := redigo.New(p)
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
