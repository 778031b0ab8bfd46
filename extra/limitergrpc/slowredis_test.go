package limitergrpc_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// TestSlowRedisIsUnavailable: the package doc and README promise
// codes.Unavailable for "a call that could not be decided (Redis down under
// FailError)". A Redis that accepts connections and never answers (a hung
// or blackholed server) with the limiter's own WithTimeout must give
// Unavailable too, not DeadlineExceeded: the client's own deadline (30 s)
// is far away.
func TestSlowRedisIsUnavailable(t *testing.T) {
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	go func() {
		for {
			c, err := hung.Accept()
			if err != nil {
				return
			}
			defer c.Close() // read nothing, answer nothing
		}
	}()
	rdb := redis.NewClient(&redis.Options{Addr: hung.Addr().String(), MaxRetries: -1, ContextTimeoutEnabled: true})
	defer rdb.Close()
	lim, err := limiter.New(goredis.New(rdb), strategy.NewFixedWindow(), limiter.WithTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	rl, err := rules.New(context.Background(), lim, rules.Static(&rules.Set{Default: rules.LimitUnknown(limiter.PerMinute(2))}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = serveRules(t, rl).Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("Redis hung, limiter timeout 200ms, client deadline 30s: %v; want Unavailable", err)
	}
}
