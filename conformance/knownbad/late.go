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
//
// With Room, it admits only while a read (a Peek) shows at least half the
// limit left ("far from the limit, one more cannot matter"), without
// counting the admission, and gives up (limiter.ErrContention) otherwise:
// some calls give up as they must, and the ones admitted on contention
// while the limit was far still take the limit past its Rate.
type ContentionAdmits struct {
	Strategy limiter.Strategy // the optimistic strategy wrapped
	Degraded bool             // mark the admission Degraded (Cause: the contention)
	Room     bool             // admit only while half the limit is left
}

// Decide implements limiter.Strategy, wrongly.
func (s ContentionAdmits) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	r, err := s.Strategy.Decide(ctx, st, req)
	if errors.Is(err, limiter.ErrContention) {
		if s.Room {
			peek := req
			peek.DryRun = true
			p, perr := s.Strategy.Decide(ctx, st, peek)
			if perr != nil || !p.Allowed || p.Remaining < req.Limits[p.Index].Rate/2 {
				return r, err
			}
			p.RetryAfter = 0
			return p, nil
		}
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

// AbortDenies wraps an optimistic strategy built with one attempt per
// decision: a WATCH/MULTI transaction without a retry loop, which takes an
// EXEC aborted by a write to a watched key as a denial ("someone else just
// counted: try again"). A key that expires between its WATCH and its EXEC
// aborts the EXEC too (Redis 6.0.9 and later): a request made as its
// window ends is denied, in a window that has just begun with the whole
// limit left.
type AbortDenies struct {
	Strategy limiter.Strategy // the optimistic strategy wrapped, one attempt per decision
}

// Decide implements limiter.Strategy, wrongly.
func (s AbortDenies) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	r, err := s.Strategy.Decide(ctx, st, req)
	if !errors.Is(err, limiter.ErrContention) {
		return r, err
	}
	var b limiter.Binder
	for i := range req.Limits {
		b.Add(i, 0, req.Limits[i].Period, time.Millisecond)
	}
	return b.Result(false), nil
}

// CheckStore implements limiter.StoreChecker for the wrapped strategy.
func (s AbortDenies) CheckStore(st store.Store) error {
	if sc, ok := s.Strategy.(limiter.StoreChecker); ok {
		return sc.CheckStore(st)
	}
	return nil
}

// ZeroCostExpire is a correct strategy whose calls of cost 0 (AllowN(0): a
// check that counts nothing; a Peek is left alone) also give each limit's
// key its Period as its expiry, meant to repair a key found without a TTL
// but written without NX and without reading the PTTL first: each such
// call restarts a live window, so a subject that keeps checking holds a
// counter, and a limit it used up, past its window's end.
type ZeroCostExpire struct {
	Strategy limiter.Strategy // the correct strategy wrapped
}

// Decide implements limiter.Strategy, wrongly.
func (s ZeroCostExpire) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	r, err := s.Strategy.Decide(ctx, st, req)
	if err != nil || req.Cost != 0 || req.DryRun {
		return r, err
	}
	cmds := make([]store.Cmd, len(req.Keys))
	for i, k := range req.Keys {
		cmds[i] = store.Cmd{Name: "PEXPIRE", Args: []any{k, req.Limits[i].Period.Milliseconds()}}
	}
	if _, err := st.Do(ctx, cmds...); err != nil {
		return limiter.Result{}, fmt.Errorf("knownbad: PEXPIRE: %w", err)
	}
	return r, nil
}
