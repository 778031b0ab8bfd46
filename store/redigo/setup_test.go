package redigo_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/quotagate/limiter/internal/adaptertest"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store/redigo"
)

// TestConnectionSetupErrors: with a wrong password every call fails with
// the server's refusal (adaptertest.Refused).
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
	adaptertest.Refused(t, redigo.New(p))
}
