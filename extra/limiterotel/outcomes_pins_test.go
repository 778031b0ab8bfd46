package limiterotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/extra/limiterotel"
)

// TestDegradedOutcomesAndCauseEvent: the two degraded outcomes are their
// own attribute values, an unnamed limit's rule is its period, and a
// Degraded Result's Cause is an "exception" event of its kind on the span,
// which carries the call's strategy, Remaining and RetryAfter (seconds).
func TestDegradedOutcomesAndCauseEvent(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	spans := tracetest.NewSpanRecorder()
	obs, err := limiterotel.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)), limiterotel.WithStrategy("s"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l := limiter.PerMinute(2)
	cause := errors.New("ERR down")
	for _, r := range []limiter.Result{
		{Allowed: true, Degraded: true, Cause: cause, Limit: l},
		{Degraded: true, Cause: cause, Limit: l, RetryAfter: 1500 * time.Millisecond, Remaining: 0},
		{Degraded: true, Cause: cause, Limit: l, RetryAfter: time.Second},
		{Allowed: true, Limit: l, Remaining: 7},
	} {
		obs.OnError(ctx, "u", r.Cause)
		obs.OnDecision(ctx, "u", r)
		obs.OnCall(ctx, "u", r, nil, 5*time.Millisecond)
	}
	got, hists := collect(t, reader)
	for _, p := range hists {
		if v, _ := p.Attributes.Value("limiter.strategy"); v.AsString() != "s" {
			t.Errorf("duration point without the strategy: %v", p.Attributes.ToSlice())
		}
		if p.Sum < 0.0199 || p.Sum > 0.0201 {
			t.Errorf("duration sum %v, want 0.02 (seconds)", p.Sum)
		}
	}
	for key, want := range map[string]int64{
		"limiter.decisions limiter.outcome=degraded_allowed limiter.rule=1m0s limiter.strategy=s": 1,
		"limiter.decisions limiter.outcome=degraded_denied limiter.rule=1m0s limiter.strategy=s":  2,
		"limiter.decisions limiter.outcome=allowed limiter.rule=1m0s limiter.strategy=s":          1,
		"limiter.errors limiter.error.kind=backend limiter.strategy=s":                            3,
	} {
		if got[key] != want {
			t.Errorf("%s = %d, want %d (all: %v)", key, got[key], want, got)
		}
	}
	ended := spans.Ended()
	if len(ended) != 4 {
		t.Fatalf("%d spans, want 4", len(ended))
	}
	for i, s := range ended {
		attrs := attribute.NewSet(s.Attributes()...)
		if v, _ := attrs.Value("limiter.strategy"); v.AsString() != "s" {
			t.Errorf("span %d: strategy %q", i, v.AsString())
		}
		if d := s.EndTime().Sub(s.StartTime()); d != 5*time.Millisecond {
			t.Errorf("span %d lasts %s, want the call's 5ms", i, d)
		}
		wantEvents := 1
		if i == 3 {
			wantEvents = 0
		}
		if len(s.Events()) != wantEvents {
			t.Errorf("span %d: %d events, want %d (the Cause)", i, len(s.Events()), wantEvents)
		} else if wantEvents == 1 {
			ev := attribute.NewSet(s.Events()[0].Attributes...)
			if v, _ := ev.Value("exception.type"); s.Events()[0].Name != "exception" || v.AsString() != "limiter.backend" {
				t.Errorf("span %d event %q type %q, want exception limiter.backend", i, s.Events()[0].Name, v.AsString())
			}
		}
	}
	a1 := attribute.NewSet(ended[1].Attributes()...)
	if v, _ := a1.Value("limiter.retry_after_seconds"); v.AsFloat64() != 1.5 {
		t.Errorf("retry_after_seconds %v, want 1.5", v.AsFloat64())
	}
	a3 := attribute.NewSet(ended[3].Attributes()...)
	if v, ok := a3.Value("limiter.remaining"); !ok || v.AsInt64() != 7 {
		t.Errorf("remaining %v, want 7", v.AsInt64())
	}
}

// TestNilTracerProvider: "a nil tp records no spans" (and does not panic).
func TestNilTracerProvider(t *testing.T) {
	obs, err := limiterotel.New(sdkmetric.NewMeterProvider(), nil)
	if err != nil {
		t.Fatal(err)
	}
	obs.OnCall(context.Background(), "u", limiter.Result{Allowed: true}, nil, time.Millisecond)
}
