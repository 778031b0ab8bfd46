// Package limitergin limits the requests of a gin engine, group or route
// with an httplimit.Middleware: the same keys, rules, RateLimit header
// fields and 429/503 answers as the net/http middleware.
//
//	m, err := httplimit.NewFixed(lim, "login", []limiter.Limit{limiter.PerMinute(3)})
//	...
//	r.POST("/login", limitergin.Middleware(m), login)
//
// It lives in a module of its own, so that the limiter module's users who
// do not use gin never download it.
package limitergin
