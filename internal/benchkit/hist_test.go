package benchkit

import (
	"testing"
	"time"
)

// TestHistogram: quantiles of known latencies come back within the
// buckets' 4%.
func TestHistogram(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 {
		t.Fatal("an empty histogram has a median")
	}
	for i := 1; i <= 1000; i++ {
		h.Add(time.Duration(i) * 10 * time.Microsecond) // 10 µs .. 10 ms
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5 * time.Millisecond}, {0.99, 9900 * time.Microsecond}, {0.001, 10 * time.Microsecond}} {
		got := h.Quantile(c.q)
		if got < c.want || float64(got) > 1.05*float64(c.want) {
			t.Errorf("quantile %.3f = %s, want %s to 4%% above", c.q, got, c.want)
		}
	}
	h.Add(0)
	h.Add(time.Hour)
	if got := h.Quantile(1); got < 100*time.Second {
		t.Errorf("the largest latency reads %s", got)
	}
}

// TestHistogramNearestRank: a quantile is the latency of the recorded one
// at rank ⌈q·n⌉ (nearest rank), also where q·n is not whole: of three
// latencies the median is the second, the 0.1 quantile the first.
func TestHistogramNearestRank(t *testing.T) {
	var h Histogram
	for _, d := range []time.Duration{100 * time.Microsecond, time.Millisecond, 10 * time.Millisecond} {
		h.Add(d)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.1, 100 * time.Microsecond}, {0.5, time.Millisecond}, {0.67, 10 * time.Millisecond}, {1, 10 * time.Millisecond}} {
		got := h.Quantile(c.q)
		if got < c.want || float64(got) > 1.05*float64(c.want) {
			t.Errorf("quantile %.2f of 100µs, 1ms, 10ms = %s, want %s to 4%% above", c.q, got, c.want)
		}
	}
}
