package knownbad

import (
	"context"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// PeekThenCount is Bucketed decided in two round trips, as a hand-written
// time-bucketed limiter often is: read the window's count and decide in the
// app (a Peek), then count the admission (the INCRBY), trusting the read.
// Callers racing between the read and the count all saw room for one
// more, and all are admitted: under contention a user sees the window
// admit well past its limit, though its counter never reads above it.
type PeekThenCount struct{ *strategy.Bucketed }

// Decide implements limiter.Strategy, wrongly.
func (s PeekThenCount) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	if req.DryRun || req.Cost == 0 {
		return s.Bucketed.Decide(ctx, st, req)
	}
	peek := req
	peek.DryRun = true
	r, err := s.Bucketed.Decide(ctx, st, peek)
	if err != nil || !r.Allowed {
		return r, err
	}
	// the count: its verdict is not read again, the peek said yes
	counted, err := s.Bucketed.Decide(ctx, st, req)
	if err != nil {
		return limiter.Result{}, err
	}
	counted.Allowed, counted.RetryAfter = true, 0
	return counted, nil
}
