package limitergrpc_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/extra/limitergrpc"
)

// TestWithKeyNilIsPeerIP: WithKey(nil) leaves the default, PeerIP(), and
// does not crash the server on the first call.
func TestWithKeyNilIsPeerIP(t *testing.T) {
	m := miniredis.RunT(t)
	c := serveHealth(t, m.Addr(), limiter.FailError, limitergrpc.WithKey(nil))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("first call: %v", err)
	}
	if keys := m.Keys(); len(keys) != 1 {
		t.Errorf("keys %q; want one counter, the peer's", keys)
	}
}
