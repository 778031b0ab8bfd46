package limitergrpc_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/store/goredis"
)

// TestContentionRetryInfoSubSecond: under FailError a contended call gets
// the RetryInfo FailClosed gives it ("the same answer"): the first rule's
// Period, at most a second, so 200ms for a 200ms rule.
func TestContentionRetryInfoSubSecond(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	for _, mode := range []limiter.FailMode{limiter.FailClosed, limiter.FailError} {
		lim, err := limiter.New(goredis.New(rdb), contended{}, limiter.WithFailMode(mode))
		if err != nil {
			t.Fatal(err)
		}
		rl, err := rules.New(context.Background(), lim, rules.Static(&rules.Set{Default: rules.LimitUnknown(limiter.Limit{Rate: 5, Period: 200 * time.Millisecond, Name: "burst"})}))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = serveRules(t, rl).Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		var got time.Duration = -1
		for _, d := range status.Convert(err).Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				got = ri.GetRetryDelay().AsDuration()
			}
		}
		if got != 200*time.Millisecond {
			t.Errorf("%s, contention: RetryInfo delay %v; want 200ms (the rule's period)", mode, got)
		}
	}
}
