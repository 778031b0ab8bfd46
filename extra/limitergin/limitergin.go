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

import (
	"github.com/gin-gonic/gin"

	"github.com/quotagate/limiter/httplimit"
)

// Middleware returns a gin handler that decides each request with m: an
// admitted request goes on to the next handler with the rate limit fields
// on its response header; a denied one, or one that could not be decided,
// is answered by m's handlers and the chain is aborted.
func Middleware(m *httplimit.Middleware) gin.HandlerFunc {
	return func(c *gin.Context) {
		if _, ok := m.Decide(c.Writer, c.Request); !ok {
			c.Abort()
			return
		}
		c.Next()
	}
}
