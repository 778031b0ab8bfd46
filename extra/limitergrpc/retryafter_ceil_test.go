package limitergrpc_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/extra/limitergrpc"
)

// TestRetryAfterMetadataRoundsUp: retry-after is "in whole seconds rounded
// up": a denial by a 500ms rule, retryable in under a second, says 1, not 0.
func TestRetryAfterMetadataRoundsUp(t *testing.T) {
	c := serve(t, miniredis.RunT(t), limiter.FailError, limiter.Limit{Rate: 1, Period: 500 * time.Millisecond, Name: "half"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 2; i++ {
		var header metadata.MD
		_, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
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
