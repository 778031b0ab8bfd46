package limiterprom_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/extra/limiterprom"
)

// counterValue reads one sample of a counter family from reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue metrics
				}
			}
			return counter(m)
		}
	}
	return 0
}

func counter(m *dto.Metric) float64 { return m.GetCounter().GetValue() }

// TestOutcomesAndRuleLabels: every outcome the doc names is its own label
// value (a FailClosed denial is degraded_denied, not denied), and the rule
// of an unnamed limit is its period.
func TestOutcomesAndRuleLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	obs, err := limiterprom.New(reg, limiterprom.WithStrategy("s"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l := limiter.PerMinute(2)
	cause := errors.New("ERR down")
	obs.OnDecision(ctx, "u", limiter.Result{Allowed: true, Limit: l})
	obs.OnDecision(ctx, "u", limiter.Result{Limit: l})
	obs.OnDecision(ctx, "u", limiter.Result{Allowed: true, Degraded: true, Cause: cause, Limit: l})
	obs.OnDecision(ctx, "u", limiter.Result{Degraded: true, Cause: cause, Limit: l})
	obs.OnDecision(ctx, "u", limiter.Result{Degraded: true, Cause: cause, Limit: l})
	for outcome, want := range map[string]float64{"allowed": 1, "denied": 1, "degraded_allowed": 1, "degraded_denied": 2} {
		if got := counterValue(t, reg, "limiter_decisions_total", map[string]string{"strategy": "s", "rule": "1m0s", "outcome": outcome}); got != want {
			t.Errorf("limiter_decisions_total{rule=\"1m0s\",outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
	if got := limiterprom.Rule(limiter.Limit{}); got != "none" {
		t.Errorf("Rule(zero Limit) = %q, want \"none\"", got)
	}
}

// TestNewFailingOnTheHistogramLeavesNothing: a registry that holds another
// decision_duration_seconds makes New fail, and the two counters New
// registered before it are unregistered ("nothing is left half done").
func TestNewFailingOnTheHistogramLeavesNothing(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewHistogram(prometheus.HistogramOpts{Name: "limiter_decision_duration_seconds", Help: "another's"}))
	if _, err := limiterprom.New(reg); err == nil {
		t.Fatal("New over another histogram of the same name succeeded")
	}
	// the counters, as New makes them, register: New left neither behind
	for _, c := range []prometheus.Collector{
		prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "limiter", Name: "decisions_total",
			Help: "Rate limit decisions, by binding rule and outcome (degraded: made by the fail mode, not by Redis)."}, []string{"strategy", "rule", "outcome"}),
		prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "limiter", Name: "errors_total",
			Help: "Errors met by rate limit calls, returned or behind a degraded decision, by kind."}, []string{"strategy", "kind"}),
	} {
		if err := reg.Register(c); err != nil {
			t.Errorf("after a refused New: %v; want New to have left nothing registered", err)
		}
	}
	// and a New under another namespace then works
	if _, err := limiterprom.New(reg, limiterprom.WithNamespace("x")); err != nil {
		t.Errorf("New(WithNamespace(x)) = %v", err)
	}
}

// TestDurationBucketsAndUnit: the default buckets are 0.25 ms to 1 s, and
// a call is observed in seconds.
func TestDurationBucketsAndUnit(t *testing.T) {
	reg := prometheus.NewRegistry()
	obs, err := limiterprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	obs.OnCall(context.Background(), "u", limiter.Result{}, nil, 3*time.Millisecond)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{.00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "limiter_decision_duration_seconds" {
			continue
		}
		found = true
		h := mf.GetMetric()[0].GetHistogram()
		var bounds []float64
		for _, b := range h.GetBucket() {
			bounds = append(bounds, b.GetUpperBound())
		}
		if !slices.Equal(bounds, want) {
			t.Errorf("buckets %v, want %v", bounds, want)
		}
		if s := h.GetSampleSum(); s < 0.0029 || s > 0.0031 {
			t.Errorf("a 3 ms call observed as %v; want 0.003 (seconds)", s)
		}
	}
	if !found {
		t.Error("no limiter_decision_duration_seconds")
	}
}
