package limitergrpc_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/extra/limitergrpc"
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// hungRules returns a rules.Limiter, with the limiter's own WithTimeout
// of timeout, on a Redis that accepts connections and never answers (a
// hung or blackholed server), through go-redis with ContextTimeoutEnabled
// (each read's deadline the call's).
func hungRules(t *testing.T, timeout time.Duration) *rules.Limiter {
	t.Helper()
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hung.Close() })
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
	t.Cleanup(func() { _ = rdb.Close() })
	lim, err := limiter.New(goredis.New(rdb), strategy.NewFixedWindow(), limiter.WithTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	rl, err := rules.New(context.Background(), lim, rules.Static(&rules.Set{Default: rules.LimitUnknown(limiter.PerMinute(2))}))
	if err != nil {
		t.Fatal(err)
	}
	return rl
}

// TestSlowRedisIsUnavailable: the package doc and README promise
// codes.Unavailable for "a call that could not be decided (Redis down under
// FailError)". A hung Redis with the limiter's own WithTimeout must give
// Unavailable too, not DeadlineExceeded: the client's own deadline (30 s)
// is far away.
func TestSlowRedisIsUnavailable(t *testing.T) {
	rl := hungRules(t, 200*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := serveRules(t, rl).Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("Redis hung, limiter timeout 200ms, client deadline 30s: %v; want Unavailable", err)
	}
}

// TestOwnDeadlineIsDeadlineExceeded: only the call's own end gives
// Canceled or DeadlineExceeded (the package doc). A call whose own
// deadline (50 ms, the limiter's timeout 10 s) ends the decision on a hung
// Redis ends DeadlineExceeded every time, not Unavailable (an outage, as
// the server's status metrics and logs would count it): go-redis times
// the read out at the call's deadline, often before the context's own
// timer has fired.
func TestOwnDeadlineIsDeadlineExceeded(t *testing.T) {
	ic := limitergrpc.UnaryServerInterceptor(hungRules(t, 10*time.Second))
	info := &grpc.UnaryServerInfo{FullMethod: "/svc/M"}
	h := func(context.Context, any) (any, error) { return "ok", nil }
	base := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 1}})
	got := map[codes.Code]int{}
	for range 20 {
		ctx, cancel := context.WithTimeout(base, 50*time.Millisecond)
		_, err := ic(ctx, nil, info, h)
		cancel()
		got[status.Code(err)]++
	}
	if got[codes.DeadlineExceeded] != 20 {
		t.Errorf("20 calls ended by their own 50ms deadline (limiter timeout 10s), Redis hung: codes %v; want DeadlineExceeded 20 times", got)
	}
}
