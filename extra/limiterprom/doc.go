// Package limiterprom exports a Limiter's decisions as Prometheus metrics:
// an Observer to pass to limiter.WithObserver.
//
//	obs, err := limiterprom.New(prometheus.DefaultRegisterer, limiterprom.WithStrategy("gcra"))
//	...
//	lim, err := limiter.New(st, strategy.NewGCRA(), limiter.WithObserver(obs))
//
// Metrics (with the default namespace "limiter"):
//
//	limiter_decisions_total{strategy, rule, outcome}   counter; outcome is
//	    allowed, denied, degraded_allowed (FailOpen) or degraded_denied
//	limiter_errors_total{strategy, kind}               counter; kind as
//	    limiter.ErrorKind names it (timeout, backend, invalid_input, ...)
//	limiter_decision_duration_seconds{strategy}        histogram of every
//	    call, decided or not
//
// The rule label is the binding limit's Name, or its period ("1s") when it
// has none: a small, fixed set, never the subject.
//
// It lives in a module of its own, so that the limiter module's users who
// do not use Prometheus never download it.
package limiterprom
