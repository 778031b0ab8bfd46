package limiterprom

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quotagate/limiter"
)

// Observer counts decisions and errors and times calls. It implements
// limiter.Observer and limiter.CallObserver.
type Observer struct {
	decisions *prometheus.CounterVec
	errors    *prometheus.CounterVec
	duration  prometheus.Observer
	strategy  string
}

type config struct {
	namespace string
	strategy  string
	buckets   []float64
}

// Option configures an Observer.
type Option func(*config)

// WithNamespace sets the metrics' namespace (default "limiter").
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithStrategy sets the strategy label of every metric (default ""); bytes
// that are not UTF-8 become U+FFFD, as a label value must be UTF-8.
func WithStrategy(name string) Option {
	return func(c *config) { c.strategy = strings.ToValidUTF8(name, "\uFFFD") }
}

// WithBuckets sets the duration histogram's buckets, in seconds (default
// 0.25 ms to 1 s; none: Prometheus's default buckets), in increasing
// order: New returns ErrInvalidBuckets for others.
func WithBuckets(b ...float64) Option { return func(c *config) { c.buckets = b } }

// ErrInvalidBuckets is returned by New for buckets that are not in
// increasing order (or not numbers); it registers nothing then.
var ErrInvalidBuckets = errors.New("limiterprom: invalid histogram buckets")

// New registers the metrics with reg and returns their Observer. Several
// Observers may share one registry (one per strategy or Limiter, told
// apart by WithStrategy): the first registers the metrics, the others
// report to them (with the first's buckets: a histogram's buckets are
// fixed once it is registered).
func New(reg prometheus.Registerer, opts ...Option) (*Observer, error) {
	c := config{namespace: "limiter", buckets: []float64{.00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}}
	for _, o := range opts {
		o(&c)
	}
	// (client_golang checks the buckets when the histogram is first used,
	// with a panic, after it was registered: checked before anything is)
	for i, b := range c.buckets {
		if math.IsNaN(b) || i > 0 && b <= c.buckets[i-1] {
			return nil, fmt.Errorf("%w: %v: each must be a number above the one before", ErrInvalidBuckets, c.buckets)
		}
	}
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: c.namespace, Name: "decisions_total",
		Help: "Rate limit decisions, by binding rule and outcome (degraded: made by the fail mode, not by Redis).",
	}, []string{"strategy", "rule", "outcome"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: c.namespace, Name: "errors_total",
		Help: "Errors met by rate limit calls, returned or behind a degraded decision, by kind.",
	}, []string{"strategy", "kind"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: c.namespace, Name: "decision_duration_seconds",
		Help:    "Duration of rate limit calls, decided or not.",
		Buckets: c.buckets,
	}, []string{"strategy"})
	// A second Observer on one registry (another strategy's, another
	// Limiter's) shares the metrics the first registered. A metric that
	// cannot be registered (another of its name, with other labels)
	// unregisters those this call registered: nothing is left half done.
	var err error
	var added []prometheus.Collector
	undo := func() {
		for _, col := range added {
			reg.Unregister(col)
		}
	}
	if decisions, err = register(reg, decisions, &added); err != nil {
		return nil, err
	}
	if errs, err = register(reg, errs, &added); err != nil {
		undo()
		return nil, err
	}
	if duration, err = register(reg, duration, &added); err != nil {
		undo()
		return nil, err
	}
	return &Observer{decisions: decisions, errors: errs, duration: duration.WithLabelValues(c.strategy), strategy: c.strategy}, nil
}

// register registers col with reg (and adds it to added), or returns the
// collector of the same description registered already.
func register[C prometheus.Collector](reg prometheus.Registerer, col C, added *[]prometheus.Collector) (C, error) {
	err := reg.Register(col)
	if err == nil {
		*added = append(*added, col)
		return col, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return col, fmt.Errorf("limiterprom: %w", err)
}

// OnDecision implements limiter.Observer.
func (o *Observer) OnDecision(_ context.Context, _ string, r limiter.Result) {
	outcome := "denied"
	switch {
	case r.Allowed && r.Degraded:
		outcome = "degraded_allowed"
	case r.Allowed:
		outcome = "allowed"
	case r.Degraded:
		outcome = "degraded_denied"
	}
	o.decisions.WithLabelValues(o.strategy, Rule(r.Limit), outcome).Inc()
}

// OnError implements limiter.Observer.
func (o *Observer) OnError(_ context.Context, _ string, err error) {
	o.errors.WithLabelValues(o.strategy, limiter.ErrorKind(err)).Inc()
}

// OnCall implements limiter.CallObserver.
func (o *Observer) OnCall(_ context.Context, _ string, _ limiter.Result, _ error, took time.Duration) {
	o.duration.Observe(took.Seconds())
}

// Rule is the rule label of l: its Name (bytes that are not UTF-8 replaced
// by U+FFFD), or its period.
func Rule(l limiter.Limit) string {
	switch {
	case l.Name != "":
		return strings.ToValidUTF8(l.Name, "\uFFFD") // a label value must be UTF-8
	case l.Period > 0:
		return l.Period.String()
	}
	return "none"
}
