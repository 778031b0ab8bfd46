package limitergrpc_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/extra/limitergrpc"
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// TestDefaultDenyNamesNoRule: a rule set's Default is deny by default
// (its zero value). A peer without rules of its own is refused by
// configuration, not by a quota; the interceptor must not tell it that a
// rule "0/0s" ("0 per 0s") was exceeded.
func TestDefaultDenyNamesNoRule(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	lim, _ := limiter.New(goredis.New(rdb), strategy.NewFixedWindow())
	rl, err := rules.New(context.Background(), lim, rules.Static(&rules.Set{
		Subjects: map[string][]limiter.Limit{"10.0.0.1": {limiter.PerMinute(5).Named("partner")}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(limitergrpc.UnaryServerInterceptor(rl)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	conn, _ := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var header metadata.MD
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || len(header.Get(limitergrpc.MetadataRule)) != 0 || len(header.Get(limitergrpc.MetadataRetryAfter)) != 0 ||
		st.Message() != "rate limit exceeded: no rule admits this caller" || len(st.Details()) != 1 {
		t.Errorf("denied by the Default: code %s, message %q, details %v, header %v; want ResourceExhausted naming no rule, no retry-after, one QuotaFailure", st.Code(), st.Message(), st.Details(), header)
	}
}
