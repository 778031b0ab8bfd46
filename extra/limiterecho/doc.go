// Package limiterecho limits the requests of an echo server, group or
// route with an httplimit.Middleware: the same keys, rules, RateLimit
// header fields and 429/503 answers as the net/http middleware.
//
//	m, err := httplimit.NewFixed(lim, "login", []limiter.Limit{limiter.PerMinute(3)})
//	...
//	e.POST("/login", login, limiterecho.Middleware(m))
//
// It lives in a module of its own, so that the limiter module's users who
// do not use echo never download it.
package limiterecho
