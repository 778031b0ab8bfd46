package limiterprom_test

import (
	"errors"
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotagate/limiter/extra/limiterprom"
)

// TestBadBucketsIsAnError: buckets out of order (or NaN) are
// ErrInvalidBuckets from New, not a panic with the metrics left
// registered (after which every New on the registry panicked too); the
// registry then takes a New with good buckets.
func TestBadBucketsIsAnError(t *testing.T) {
	reg := prometheus.NewRegistry()
	newObs := func(opts ...limiterprom.Option) (obs *limiterprom.Observer, err error, panicked any) {
		defer func() { panicked = recover() }()
		obs, err = limiterprom.New(reg, opts...)
		return
	}
	for _, b := range [][]float64{{1, 0.5}, {0.1, 0.1}, {math.NaN()}, {0.1, math.NaN(), 1}} {
		obs, err, p := newObs(limiterprom.WithBuckets(b...))
		if p != nil || obs != nil || !errors.Is(err, limiterprom.ErrInvalidBuckets) {
			t.Errorf("New(WithBuckets(%v)) = %v, %v, panic %v; want ErrInvalidBuckets", b, obs, err, p)
		}
	}
	if n, err := reg.Gather(); err != nil || len(n) != 0 {
		t.Errorf("after the refused News the registry holds %d metric families (%v); want none", len(n), err)
	}
	for _, b := range [][]float64{{0.001, 1, math.Inf(1)}, nil} {
		if obs, err, p := newObs(limiterprom.WithBuckets(b...)); p != nil || err != nil || obs == nil {
			t.Errorf("New(WithBuckets(%v)) after the refused ones: %v, %v, panic %v; want an Observer", b, obs, err, p)
		}
	}
}
