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
