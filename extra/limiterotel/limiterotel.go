package limiterotel

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/quotagate/limiter"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/quotagate/limiter"

// Observer records decisions, errors and call durations. It implements
// limiter.Observer and limiter.CallObserver.
type Observer struct {
	decisions metric.Int64Counter
	errors    metric.Int64Counter
	duration  metric.Float64Histogram
	tracer    trace.Tracer
	strategy  attribute.KeyValue
}

type config struct{ strategy string }

// Option configures an Observer.
type Option func(*config)

// WithStrategy sets the limiter.strategy attribute (default ""); bytes
// that are not UTF-8 become U+FFFD, as OTLP exports only UTF-8 strings.
func WithStrategy(name string) Option {
	return func(c *config) { c.strategy = strings.ToValidUTF8(name, "\uFFFD") }
}

// New returns an Observer reporting to mp and tp; a nil tp records no
// spans.
func New(mp metric.MeterProvider, tp trace.TracerProvider, opts ...Option) (*Observer, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	meter := mp.Meter(ScopeName)
	o := &Observer{strategy: attribute.String("limiter.strategy", c.strategy)}
	var err error
	if o.decisions, err = meter.Int64Counter("limiter.decisions", metric.WithDescription("Rate limit decisions, by binding rule and outcome (degraded: made by the fail mode, not by Redis)."), metric.WithUnit("{decision}")); err != nil {
		return nil, fmt.Errorf("limiterotel: %w", err)
	}
	if o.errors, err = meter.Int64Counter("limiter.errors", metric.WithDescription("Errors met by rate limit calls, returned or behind a degraded decision, by kind."), metric.WithUnit("{error}")); err != nil {
		return nil, fmt.Errorf("limiterotel: %w", err)
	}
	if o.duration, err = meter.Float64Histogram("limiter.decision.duration", metric.WithDescription("Duration of rate limit calls, decided or not."), metric.WithUnit("s"),
		// in seconds: the SDK's default boundaries (0 to 10 000) are for
		// milliseconds and would put every call in one bucket
		metric.WithExplicitBucketBoundaries(.00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1)); err != nil {
		return nil, fmt.Errorf("limiterotel: %w", err)
	}
	if tp != nil {
		o.tracer = tp.Tracer(ScopeName)
	}
	return o, nil
}

// OnDecision implements limiter.Observer.
func (o *Observer) OnDecision(ctx context.Context, _ string, r limiter.Result) {
	o.decisions.Add(ctx, 1, metric.WithAttributes(o.strategy, attribute.String("limiter.rule", rule(r.Limit)), attribute.String("limiter.outcome", outcome(r))))
}

// OnError implements limiter.Observer.
func (o *Observer) OnError(ctx context.Context, _ string, err error) {
	o.errors.Add(ctx, 1, metric.WithAttributes(o.strategy, attribute.String("limiter.error.kind", limiter.ErrorKind(err))))
}

// OnCall implements limiter.CallObserver: the duration, and the call's
// span.
func (o *Observer) OnCall(ctx context.Context, _ string, r limiter.Result, err error, took time.Duration) {
	o.duration.Record(ctx, took.Seconds(), metric.WithAttributes(o.strategy))
	if o.tracer == nil {
		return
	}
	end := time.Now()
	_, span := o.tracer.Start(ctx, "limiter.decide", trace.WithTimestamp(end.Add(-took)), trace.WithSpanKind(trace.SpanKindInternal))
	span.SetAttributes(o.strategy)
	if err != nil {
		recordKind(span, err)
		span.SetStatus(codes.Error, limiter.ErrorKind(err))
	} else {
		span.SetAttributes(
			attribute.String("limiter.outcome", outcome(r)),
			attribute.String("limiter.rule", rule(r.Limit)),
			attribute.Int64("limiter.remaining", r.Remaining),
			attribute.Float64("limiter.retry_after_seconds", r.RetryAfter.Seconds()))
		if r.Cause != nil {
			recordKind(span, r.Cause)
		}
	}
	span.End(trace.WithTimestamp(end))
}

func outcome(r limiter.Result) string {
	switch {
	case r.Allowed && r.Degraded:
		return "degraded_allowed"
	case r.Allowed:
		return "allowed"
	case r.Degraded:
		return "degraded_denied"
	}
	return "denied"
}

func rule(l limiter.Limit) string {
	switch {
	case l.Name != "":
		return strings.ToValidUTF8(l.Name, "\uFFFD") // an attribute string must be UTF-8
	case l.Period > 0:
		return l.Period.String()
	}
	return "none"
}

// recordKind records err on span as an "exception" event with its kind
// (limiter.ErrorKind) as its type and no message: an error's text may name
// a key, and a key holds the subject, which may be personal data.
func recordKind(span trace.Span, err error) {
	span.AddEvent("exception", trace.WithAttributes(attribute.String("exception.type", "limiter."+limiter.ErrorKind(err))))
}
