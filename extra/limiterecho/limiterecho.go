package limiterecho

import (
	"github.com/labstack/echo/v4"

	"github.com/quotagate/limiter/httplimit"
)

// Middleware returns an echo middleware that decides each request with m:
// an admitted request goes on to the next handler with the rate limit
// fields on its response header; a denied one, or one that could not be
// decided, is answered by m's handlers and the next handler is not called.
func Middleware(m *httplimit.Middleware) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if _, ok := m.Decide(c.Response(), c.Request()); !ok {
				return nil
			}
			return next(c)
		}
	}
}
