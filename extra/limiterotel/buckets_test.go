package limiterotel_test

import (
	"context"
	"slices"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestDurationHistogramResolves: limiter.decision.duration is in
// seconds; a decision takes well under a millisecond to a few ms. With a
// stock MeterProvider (no View), the histogram must still tell a 100 µs call
// from a 1 s one: the decisions must not all land in one bucket.
func TestDurationHistogramResolves(t *testing.T) {
	m := miniredis.RunT(t)
	lim, reader, _ := observed(t, m, strategy.NewFixedWindow())
	ctx := context.Background()
	for range 50 {
		if _, err := lim.Allow(ctx, "u", limiter.PerMinute(1000)); err != nil {
			t.Fatal(err)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			h, ok := mt.Data.(metricdata.Histogram[float64])
			if !ok {
				continue
			}
			found = found || mt.Name == "limiter.decision.duration"
			for _, p := range h.DataPoints {
				if want := []float64{.00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}; !slices.Equal(p.Bounds, want) || p.Count != 50 {
					t.Errorf("%s: bounds %v, %d calls; want bounds %v (seconds), 50 calls", mt.Name, p.Bounds, p.Count, want)
				}
				t.Logf("%s: bounds %v (unit %q), counts %v, max %v", mt.Name, p.Bounds, mt.Unit, p.BucketCounts, p.Max)
				if p.Count > 0 && len(p.Bounds) > 0 && p.Bounds[0] <= 0 && p.BucketCounts[1] == p.Count {
					t.Errorf("%s: all %d decisions (max %v s) fall in the bucket (%v, %v] s: the histogram cannot show latency", mt.Name, p.Count, p.Max, p.Bounds[0], p.Bounds[1])
				}
			}
		}
	}
	if !found {
		t.Error("no limiter.decision.duration histogram")
	}
}
