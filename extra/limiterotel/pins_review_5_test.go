package limiterotel_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/extra/limiterotel"
)

// TestSpanCarriesRule: a decided call's span names its binding rule in
// limiter.rule, as the decisions metric does: the rule's name, or its
// period for an unnamed rule.
func TestSpanCarriesRule(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	obs, err := limiterotel.New(sdkmetric.NewMeterProvider(), sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	obs.OnCall(ctx, "u", limiter.Result{Allowed: true, Limit: limiter.PerMinute(2).Named("login")}, nil, time.Millisecond)
	obs.OnCall(ctx, "u", limiter.Result{Limit: limiter.PerSecond(3), RetryAfter: time.Second}, nil, time.Millisecond)
	ended := spans.Ended()
	if len(ended) != 2 {
		t.Fatalf("%d spans, want 2", len(ended))
	}
	for i, want := range []string{"login", "1s"} {
		attrs := attribute.NewSet(ended[i].Attributes()...)
		v, ok := attrs.Value("limiter.rule")
		if !ok || v.AsString() != want {
			t.Errorf("span %d: limiter.rule = %q (present %v); want %q", i, v.AsString(), ok, want)
		}
	}
}
