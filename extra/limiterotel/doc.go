// Package limiterotel reports a Limiter's decisions to OpenTelemetry: metrics
// and a span per call, from an Observer to pass to limiter.WithObserver.
//
//	obs, err := limiterotel.New(otel.GetMeterProvider(), otel.GetTracerProvider(), limiterotel.WithStrategy("gcra"))
//	...
//	lim, err := limiter.New(st, strategy.NewGCRA(), limiter.WithObserver(obs))
//
// Instruments (meter "github.com/quotagate/limiter"):
//
//	limiter.decisions          counter; attributes limiter.strategy,
//	                           limiter.rule, limiter.outcome (allowed,
//	                           denied, degraded_allowed, degraded_denied)
//	limiter.errors             counter; limiter.strategy, limiter.error.kind
//	                           (as limiter.ErrorKind names it)
//	limiter.decision.duration  histogram, seconds; limiter.strategy
//
// Each call is a span "limiter.decide" from its start to its end, a child
// of the span in the caller's context, with the outcome, the binding rule,
// Remaining and RetryAfter as attributes and the error, if any, recorded
// as an "exception" event of its kind (limiter.ErrorKind), without its
// text. The subject is never an attribute nor in an event (it may be
// personal data, and an error's text may name a key, which holds it): add
// it in your own span if you need it.
//
// It lives in a module of its own, so that the limiter module's users who
// do not use OpenTelemetry never download it.
package limiterotel
