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

// TestNewLeavesNothingHalfRegistered: when a metric cannot be registered
// (a metric of its name with other labels is there), New fails and
// unregisters the metrics it registered before it: the registry is as it
// was (it kept limiter_decisions_total, registered first).
func TestNewLeavesNothingHalfRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	clash := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "limiter", Name: "errors_total", Help: "another"}, []string{"other"})
	if err := reg.Register(clash); err != nil {
		t.Fatal(err)
	}
	if _, err := limiterprom.New(reg); err == nil {
		t.Fatal("New beside a clashing limiter_errors_total: no error")
	}
	// limiter_decisions_total, as New makes it, registers: New left none
	same := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "limiter", Name: "decisions_total",
		Help: "Rate limit decisions, by binding rule and outcome (degraded: made by the fail mode, not by Redis).",
	}, []string{"strategy", "rule", "outcome"})
	if err := reg.Register(same); err != nil {
		t.Errorf("limiter_decisions_total after a failed New: %v; want it not registered", err)
	}
}
