package limiterotel_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/extra/limiterotel"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// TestMetricsAndSpans decides through a Limiter with the observer on an
// in-memory reader and span recorder: 2 admitted and 1 denied by "login",
// then 1 error with Redis gone; the counters, the histogram's count and
// the four spans say so.
func TestMetricsAndSpans(t *testing.T) {
	m := miniredis.RunT(t)
	lim, reader, spans := observed(t, m, strategy.NewFixedWindow(), limiterotel.WithStrategy("fixed_window"))
	ctx := context.Background()
	l := limiter.PerMinute(2).Named("login")
	for i := range 3 {
		if r, err := lim.Allow(ctx, "u", l); err != nil || r.Allowed != (i < 2) {
			t.Fatalf("call %d: %+v, %v", i, r, err)
		}
	}
	m.Close()
	if _, err := lim.Allow(ctx, "u", l); err == nil {
		t.Fatal("a call with Redis gone succeeded")
	}

	got, hists := collect(t, reader)
	var durations uint64
	for _, p := range hists {
		durations += p.Count
	}
	for key, want := range map[string]int64{
		"limiter.decisions limiter.outcome=allowed limiter.rule=login limiter.strategy=fixed_window": 2,
		"limiter.decisions limiter.outcome=denied limiter.rule=login limiter.strategy=fixed_window":  1,
		"limiter.errors limiter.error.kind=backend limiter.strategy=fixed_window":                    1,
	} {
		if got[key] != want {
			t.Errorf("%s = %d, want %d (all: %v)", key, got[key], want, got)
		}
	}
	if durations != 4 {
		t.Errorf("duration histogram counted %d calls, want 4", durations)
	}
	ended := spans.Ended()
	if len(ended) != 4 {
		t.Fatalf("%d spans, want 4", len(ended))
	}
	for i, s := range ended {
		if s.Name() != "limiter.decide" || !s.EndTime().After(s.StartTime()) {
			t.Errorf("span %d: %q from %s to %s", i, s.Name(), s.StartTime(), s.EndTime())
		}
		attrs := attribute.NewSet(s.Attributes()...)
		out, _ := attrs.Value("limiter.outcome")
		switch {
		case i < 2 && out.AsString() != "allowed", i == 2 && out.AsString() != "denied":
			t.Errorf("span %d: outcome %q", i, out.AsString())
		case i == 3 && (s.Status().Code != codes.Error || len(s.Events()) == 0):
			t.Errorf("span %d of the failed call: status %v, %d events; want an error recorded", i, s.Status(), len(s.Events()))
		}
	}
}

// TestSpanNeverHoldsTheSubject: a call whose error names the subject's key
// (a corrupt counter: Bucketed's error quotes the key) is recorded by its
// kind, and nothing of the span holds the subject (RecordError put the
// error's text, and with it the subject, in the span's event).
func TestSpanNeverHoldsTheSubject(t *testing.T) {
	m := miniredis.RunT(t)
	lim, _, spans := observed(t, m, strategy.NewBucketed())
	ctx := context.Background()
	const subject = "alice@example.com"
	l := limiter.PerMinute(5).Named("qpm")
	if _, err := lim.Allow(ctx, subject, l); err != nil {
		t.Fatal(err)
	}
	for _, k := range m.Keys() {
		_ = m.Set(k, "garbage")
	}
	if _, err := lim.Peek(ctx, subject, l); err == nil || !strings.Contains(err.Error(), subject) {
		t.Fatalf("Peek of a corrupt counter: %v; want an error that names the key (and the subject)", err)
	}
	s := spans.Ended()[1]
	text := fmt.Sprint(s.Attributes(), s.Events(), s.Status())
	if strings.Contains(text, subject) {
		t.Errorf("the span holds the subject: %s", text)
	}
	if len(s.Events()) == 0 || s.Status().Code != codes.Error {
		t.Errorf("the failed call's span: %s; want its error recorded", text)
	}
}

// observed returns a Limiter of st on m, observed by a
// limiterotel Observer (opts) whose metrics reader collects and whose spans
// the recorder keeps.
func observed(t *testing.T, m *miniredis.Miniredis, st limiter.Strategy, opts ...limiterotel.Option) (*limiter.Limiter, *sdkmetric.ManualReader, *tracetest.SpanRecorder) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	spans := tracetest.NewSpanRecorder()
	obs, err := limiterotel.New(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)), opts...)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	lim, err := limiter.New(goredis.New(rdb), st, limiter.WithObserver(obs), limiter.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return lim, reader, spans
}

// collect reads reader's metrics: each counter's sum by its name and
// attributes ("name key=value ..."), and every histogram point.
func collect(t *testing.T, reader *sdkmetric.ManualReader) (map[string]int64, []metricdata.HistogramDataPoint[float64]) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	sums := map[string]int64{}
	var hists []metricdata.HistogramDataPoint[float64]
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					key := mt.Name
					for _, kv := range p.Attributes.ToSlice() {
						key += " " + string(kv.Key) + "=" + kv.Value.Emit()
					}
					sums[key] += p.Value
				}
			case metricdata.Histogram[float64]:
				hists = append(hists, d.DataPoints...)
			}
		}
	}
	return sums, hists
}
