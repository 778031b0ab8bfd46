package limiterecho

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/quotagate/limiter/httplimit"
)

// Middleware returns an echo middleware that decides each request with m:
// an admitted request goes on to the next handler with the rate limit
// fields on its response header; a denied one, or one that could not be
// decided, is answered by m's handlers and the next handler is not called.
//
// m sees the request with its Pattern set to the method and echo's route
// ("POST /login", "GET /users/:id"), as a ServeMux sets it, so that
// httplimit.Route() and WithRules(Route()) key requests by their route; a
// request routed nowhere as httplimit.NoRoute, which the rule set's Default
// decides.
func Middleware(m *httplimit.Middleware) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if _, ok := m.Decide(c.Response(), withPattern(c.Request(), c.Path())); !ok {
				return nil
			}
			return next(c)
		}
	}
}

// withPattern returns r with its Pattern set to its method and route (a
// shallow copy). The framework's route wins over a Pattern r has already:
// an http.ServeMux in front of the framework ("/" mounting the whole app)
// set one that names no route. A request routed nowhere keeps that one,
// or gets the route httplimit.NoRoute.
func withPattern(r *http.Request, route string) *http.Request {
	if route == "" {
		if r.Pattern != "" {
			return r
		}
		route = httplimit.NoRoute
	}
	r2 := r.WithContext(r.Context())
	r2.Pattern = r.Method + " " + route
	return r2
}
