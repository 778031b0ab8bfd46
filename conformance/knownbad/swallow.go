package knownbad

import (
	"context"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// SwallowErrors is the "let it through on any exception" error handling
// around a correct strategy: a call that fails for any reason admits the
// request, silently (logs a line and returns true). The Result is not marked Degraded and no error reaches the
// limiter, so its fail mode never applies and nobody can count or alert:
// with Redis down, every request passes unlimited.
type SwallowErrors struct {
	Strategy limiter.Strategy // the correct strategy wrapped
}

// Decide implements limiter.Strategy, wrongly.
func (s SwallowErrors) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	r, err := s.Strategy.Decide(ctx, st, req)
	if err != nil {
		return limiter.Result{Allowed: true, Remaining: req.Limits[0].Rate}, nil
	}
	return r, nil
}
