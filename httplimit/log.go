package httplimit

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/quotagate/limiter"
)

// LogInterval is the least time between two log lines of one Middleware
// (see WithLogger).
const LogInterval = 10 * time.Second

// logLimiter writes at most one line every LogInterval.
type logLimiter struct {
	l *slog.Logger

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func newLogLimiter(l *slog.Logger) *logLimiter {
	if l == nil {
		return nil
	}
	return &logLimiter{l: l}
}

// report logs a request Redis could not decide: err returned (degraded
// false) or behind a Degraded decision. A nil logLimiter logs nothing.
func (ll *logLimiter) report(r *http.Request, scope string, err error, degraded bool) {
	if ll == nil {
		return
	}
	ll.mu.Lock()
	now := time.Now()
	if !ll.last.IsZero() && now.Sub(ll.last) < LogInterval {
		ll.suppressed++
		ll.mu.Unlock()
		return
	}
	suppressed := ll.suppressed
	ll.last, ll.suppressed = now, 0
	ll.mu.Unlock()

	msg := "httplimit: the rate limiter could not decide a request"
	if degraded {
		msg = "httplimit: the fail mode decided a request (degraded)"
	}
	attrs := []slog.Attr{
		slog.String("kind", limiter.ErrorKind(err)),
		slog.Any("error", err),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("suppressed", suppressed),
	}
	if scope != "" {
		attrs = append(attrs, slog.String("scope", scope))
	}
	ll.l.LogAttrs(context.WithoutCancel(r.Context()), slog.LevelWarn, msg, attrs...)
}
