package goredis_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/adaptertest"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store/goredis"
)

// TestConnectionSetupErrors: with a wrong password every call fails with
// the server's refusal (adaptertest.Refused).
func TestConnectionSetupErrors(t *testing.T) {
	s := redistest.StartServer(t, "--requirepass", "secret")
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), Password: "wrong", MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	adaptertest.Refused(t, goredis.New(rdb))
}
