package knownbad

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// ServerTimeBucket is time-bucketed keys on the server's clock, done in the
// obvious order: read Redis TIME, pick the window, then MULTI, INCRBY,
// PEXPIREAT of the window's end, EXEC in a second round trip (and a denied
// request taken back). When a round trip is about as long as a window, the
// window it picked is over by the time the EXEC runs: the PEXPIREAT, in the
// past, deletes the key in the same transaction, so the admission is
// counted nowhere, and the limit no longer holds.
type ServerTimeBucket struct{}

// Decide implements limiter.Strategy, wrongly.
func (ServerTimeBucket) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	rs, err := st.Do(ctx, store.Cmd{Name: "TIME"})
	if err == nil {
		err = rs[0].Err
	}
	if err != nil {
		return limiter.Result{}, fmt.Errorf("knownbad: TIME: %w", err)
	}
	arr, err := store.Slice(rs[0].Val)
	if err != nil || len(arr) != 2 {
		return limiter.Result{}, fmt.Errorf("knownbad: TIME reply %v: %w", rs[0].Val, err)
	}
	sec, err1 := store.Int64(arr[0])
	usec, err2 := store.Int64(arr[1])
	if err := errors.Join(err1, err2); err != nil {
		return limiter.Result{}, fmt.Errorf("knownbad: TIME reply: %w", err)
	}
	now := time.Unix(sec, usec*1000)
	return AppClockBucket{Now: func() time.Time { return now }}.Decide(ctx, st, req)
}

// ContentionAdmits wraps an optimistic strategy and admits a request whose
// transactions kept being aborted, as if contention were a backend failure
// to fail open on. Contention means the key is hot, so it admits past the
// limit exactly when the limit matters, with Redis healthy.
//
// With Degraded, it fails open on contention as on an outage: the admission
// is marked Degraded, its Cause the contention. Honest about it, and still
// wrong: Redis answered, so no fail mode applies; under FailOpen a hot key
// admits everyone, past the limit, whenever callers collide.
type ContentionAdmits struct {
	Strategy limiter.Strategy // the optimistic strategy wrapped
	Degraded bool             // mark the admission Degraded (Cause: the contention)
}

// Decide implements limiter.Strategy, wrongly.
func (s ContentionAdmits) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	r, err := s.Strategy.Decide(ctx, st, req)
	if errors.Is(err, limiter.ErrContention) {
		if s.Degraded {
			return limiter.Result{Allowed: true, Degraded: true, Cause: err}, nil
		}
		return limiter.Result{Allowed: true}, nil
	}
	return r, err
}

// CheckStore implements limiter.StoreChecker for the wrapped strategy.
func (s ContentionAdmits) CheckStore(st store.Store) error {
	if sc, ok := s.Strategy.(limiter.StoreChecker); ok {
		return sc.CheckStore(st)
	}
	return nil
}
