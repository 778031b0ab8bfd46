package limitergin

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/quotagate/limiter/httplimit"
)

// Middleware returns a gin handler that decides each request with m: an
// admitted request goes on to the next handler with the rate limit fields
// on its response header; a denied one, or one that could not be decided,
// is answered by m's handlers and the chain is aborted.
//
// m sees the request with its Pattern set to the method and gin's route
// ("POST /login", "GET /users/:id"), as a ServeMux sets it, so that
// httplimit.Route() and WithRules(Route()) key requests by their route; a
// request routed nowhere (404, 405) as httplimit.NoRoute, whatever its
// method, which the rule set's Default decides.
func Middleware(m *httplimit.Middleware) gin.HandlerFunc {
	return func(c *gin.Context) {
		if _, ok := m.Decide(c.Writer, withPattern(c.Request, c.FullPath())); !ok {
			c.Abort()
			return
		}
		c.Next()
	}
}

// withPattern returns r with its Pattern set to its method and route (a
// shallow copy). The framework's route wins over a Pattern r has already:
// an http.ServeMux in front of the framework ("/" mounting the whole app)
// set one that names no route. A request routed nowhere keeps that one,
// or gets httplimit.NoRoute, without its method: the client chooses the
// method, and each would be a budget of its own.
func withPattern(r *http.Request, route string) *http.Request {
	pattern := r.Method + " " + route
	if route == "" {
		if r.Pattern != "" {
			return r
		}
		pattern = httplimit.NoRoute
	}
	r2 := r.WithContext(r.Context())
	r2.Pattern = pattern
	return r2
}
