package limitergrpc_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/extra/limitergrpc"
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// TestRetryAfterMetadataRoundsUp: retry-after is "in whole seconds rounded
// up": a denial by a 500ms rule, retryable in under a second, says 1, not 0.
func TestRetryAfterMetadataRoundsUp(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	lim, err := limiter.New(goredis.New(rdb), strategy.NewFixedWindow())
	if err != nil {
		t.Fatal(err)
	}
	rl, err := rules.New(context.Background(), lim, rules.Static(&rules.Set{Default: rules.LimitUnknown(limiter.Limit{Rate: 1, Period: 500 * time.Millisecond, Name: "half"})}))
	if err != nil {
		t.Fatal(err)
	}
	c := serveRules(t, rl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 2; i++ {
		var header metadata.MD
		_, err = c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
		if i == 0 {
			continue
		}
		if status.Code(err) != codes.ResourceExhausted {
			// (miniredis moves its TTLs only when told: the window
			// cannot end between the calls)
			t.Fatalf("second call within the window: %v; want ResourceExhausted", err)
		}
		if got := header.Get(limitergrpc.MetadataRetryAfter); len(got) != 1 || got[0] != "1" {
			t.Errorf("%s = %q; want 1 (a wait under a second, rounded up)", limitergrpc.MetadataRetryAfter, got)
		}
	}
}
