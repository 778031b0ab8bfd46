package limiterprom_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/extra/limiterprom"
)

// TestTwoStrategiesOneRegistry: the strategy label exists to tell
// Limiters apart, so a service with two (a GCRA for the API, a sliding log
// for logins) must be able to export both on one registry, as the doc's
// prometheus.DefaultRegisterer example does.
func TestTwoStrategiesOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := limiterprom.New(reg, limiterprom.WithStrategy("gcra"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := limiterprom.New(reg, limiterprom.WithStrategy("sliding_log"))
	if err != nil {
		t.Fatalf("second Observer, strategy sliding_log, same registry: %v", err)
	}
	ctx := context.Background()
	a.OnDecision(ctx, "k", limiter.Result{Allowed: true, Limit: limiter.PerSecond(1)})
	b.OnDecision(ctx, "k", limiter.Result{Limit: limiter.PerSecond(1)})
	b.OnCall(ctx, "k", limiter.Result{}, nil, time.Millisecond)
	want := `
# HELP limiter_decisions_total Rate limit decisions, by binding rule and outcome (degraded: made by the fail mode, not by Redis).
# TYPE limiter_decisions_total counter
limiter_decisions_total{outcome="allowed",rule="1s",strategy="gcra"} 1
limiter_decisions_total{outcome="denied",rule="1s",strategy="sliding_log"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "limiter_decisions_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "limiter_decision_duration_seconds"); n != 2 {
		t.Errorf("%d duration series, want 2 (one per strategy)", n)
	}
}
