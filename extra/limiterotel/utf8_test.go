package limiterotel_test

import (
	"context"
	"testing"
	"unicode/utf8"

	"github.com/alicebob/miniredis/v2"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/extra/limiterotel"
	"github.com/quotagate/limiter/strategy"
)

// TestNonUTF8RuleNameIsValidUTF8: a rule's name is checked only for its
// length, and OpenTelemetry string attributes must be UTF-8 (OTLP sends
// them as proto3 strings, which fail to marshal otherwise): the metric's
// and the span's limiter.rule attribute replace invalid bytes, as
// limiterprom's label does. They carried "r\xff" as given; so did
// limiter.strategy a name given to WithStrategy.
func TestNonUTF8RuleNameIsValidUTF8(t *testing.T) {
	for _, tc := range []struct {
		rule string
		opts []limiterotel.Option
	}{{"r\xff", nil}, {"r", []limiterotel.Option{limiterotel.WithStrategy("caf\xe9")}}} {
		nonUTF8Attributes(t, tc.rule, tc.opts...)
	}
}

// nonUTF8Attributes decides a limit named rule through an Observer with
// opts and fails t for every attribute that is not UTF-8.
func nonUTF8Attributes(t *testing.T, rule string, opts ...limiterotel.Option) {
	t.Helper()
	m := miniredis.RunT(t)
	lim, reader, spans := observed(t, m, strategy.NewFixedWindow(), opts...)
	ctx := context.Background()
	if _, err := lim.Allow(ctx, "u", limiter.PerMinute(2).Named(rule)); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			if s, ok := md.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range s.DataPoints {
					for _, kv := range dp.Attributes.ToSlice() {
						if v := kv.Value.Emit(); !utf8.ValidString(v) {
							t.Errorf("metric %s attribute %s = %q is not valid UTF-8", md.Name, kv.Key, v)
						}
					}
				}
			}
		}
	}
	for _, s := range spans.Ended() {
		for _, kv := range s.Attributes() {
			if v := kv.Value.Emit(); !utf8.ValidString(v) {
				t.Errorf("span %s attribute %s = %q is not valid UTF-8", s.Name(), kv.Key, v)
			}
		}
	}
}
