package knownbad

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// CounterLeases is the concurrency limiter most write first: INCR on
// acquire (DECR back when over the limit), DECR on release. A holder that
// crashes never gives its slot back (the counter has no expiry), a retried
// acquire takes a second slot, and a second release frees a slot someone
// else holds.
type CounterLeases struct{}

// Acquire implements limiter.Leaser, wrongly.
func (CounterLeases) Acquire(ctx context.Context, st store.Store, req limiter.LeaseRequest) (limiter.LeaseState, error) {
	n, err := do(ctx, st, "INCR", req.Key)
	if err != nil {
		return limiter.LeaseState{}, err
	}
	if n > req.Limit.Max {
		if _, err := do(ctx, st, "DECR", req.Key); err != nil {
			return limiter.LeaseState{}, err
		}
		return limiter.LeaseState{InFlight: n - 1, RetryAfter: time.Second}, nil
	}
	return limiter.LeaseState{Held: true, InFlight: n}, nil
}

// Extend implements limiter.Leaser: a counter cannot tell leases apart.
func (CounterLeases) Extend(ctx context.Context, st store.Store, req limiter.LeaseRequest) (limiter.LeaseState, error) {
	return limiter.LeaseState{Held: true}, nil
}

// Release implements limiter.Leaser, wrongly.
func (CounterLeases) Release(ctx context.Context, st store.Store, req limiter.LeaseRequest) error {
	_, err := do(ctx, st, "DECR", req.Key)
	return err
}

// CountThenAdd keeps leases in a sorted set by expiry, as it should, but
// counts them (ZCARD) and adds the lease (ZADD) in separate round trips:
// callers that count at once all see a free slot.
type CountThenAdd struct{}

// Acquire implements limiter.Leaser, wrongly.
func (CountThenAdd) Acquire(ctx context.Context, st store.Store, req limiter.LeaseRequest) (limiter.LeaseState, error) {
	now := time.Now().UnixMilli()
	rs, err := st.Do(ctx,
		store.Cmd{Name: "ZREMRANGEBYSCORE", Args: []any{req.Key, "-inf", now}},
		store.Cmd{Name: "ZCARD", Args: []any{req.Key}})
	if err != nil {
		return limiter.LeaseState{}, err
	}
	n, err := store.Int64(rs[1].Val)
	if err != nil {
		return limiter.LeaseState{}, fmt.Errorf("knownbad: ZCARD: %v %w", rs[1].Err, err)
	}
	if n >= req.Limit.Max {
		return limiter.LeaseState{InFlight: n, RetryAfter: time.Second}, nil
	}
	ttl := req.Limit.TTL.Milliseconds()
	if _, err := st.Do(ctx,
		store.Cmd{Name: "ZADD", Args: []any{req.Key, now + ttl, req.ID}},
		store.Cmd{Name: "PEXPIRE", Args: []any{req.Key, ttl}}); err != nil {
		return limiter.LeaseState{}, err
	}
	return limiter.LeaseState{Held: true, InFlight: n + 1}, nil
}

// Extend implements limiter.Leaser.
func (CountThenAdd) Extend(ctx context.Context, st store.Store, req limiter.LeaseRequest) (limiter.LeaseState, error) {
	rs, err := st.Do(ctx, store.Cmd{Name: "ZADD", Args: []any{req.Key, "XX", "CH", time.Now().UnixMilli() + req.Limit.TTL.Milliseconds(), req.ID}})
	if err != nil {
		return limiter.LeaseState{}, err
	}
	n, _ := store.Int64(rs[0].Val)
	return limiter.LeaseState{Held: n == 1}, nil
}

// Release implements limiter.Leaser.
func (CountThenAdd) Release(ctx context.Context, st store.Store, req limiter.LeaseRequest) error {
	_, err := st.Do(ctx, store.Cmd{Name: "ZREM", Args: []any{req.Key, req.ID}})
	return err
}

// ReleaseAbandon is a correct leaser whose Abandon is a Release (ZREM):
// when the Acquire whose outcome was unknown reaches Redis after it (a
// congested connection, the release sent on another), the Acquire takes a
// slot that no caller holds, until its TTL ends.
type ReleaseAbandon struct {
	strategy.Concurrency
}

// Abandon implements limiter.LeaseAbandoner, wrongly.
func (r ReleaseAbandon) Abandon(ctx context.Context, st store.Store, req limiter.LeaseRequest) error {
	return r.Release(ctx, st, req)
}

// do runs one command whose reply is an integer.
func do(ctx context.Context, st store.Store, name string, key string) (int64, error) {
	rs, err := st.Do(ctx, store.Cmd{Name: name, Args: []any{key}})
	if err != nil {
		return 0, err
	}
	if rs[0].Err != nil {
		return 0, rs[0].Err
	}
	return store.Int64(rs[0].Val)
}

//go:embed lua/lease_repair_then_read.lua
var leaseRepairThenReadLua string

var leaseRepairThenRead = store.NewScript(leaseRepairThenReadLua)

// RepairThenRead keeps leases in a sorted set by expiry, in one script, but
// a refusal reads the set after giving it its expiry back: on a set the
// server deleted at that expiry, the read finds nothing and the call
// fails.
type RepairThenRead struct{}

// Acquire implements limiter.Leaser, wrongly.
func (RepairThenRead) Acquire(ctx context.Context, st store.Store, req limiter.LeaseRequest) (limiter.LeaseState, error) {
	v, err := leaseRepairThenRead.Run(ctx, st, []string{req.Key}, []any{req.ID, req.Limit.Max, req.Limit.TTL.Milliseconds()})
	if err != nil {
		return limiter.LeaseState{}, err
	}
	n, err := store.Int64s(v)
	if err != nil || len(n) != 3 {
		return limiter.LeaseState{}, fmt.Errorf("knownbad: reply %v: %w", v, err)
	}
	return limiter.LeaseState{Held: n[0] == 1, InFlight: n[1], RetryAfter: time.Duration(n[2]) * time.Millisecond}, nil
}

// Extend implements limiter.Leaser, as an Acquire.
func (r RepairThenRead) Extend(ctx context.Context, st store.Store, req limiter.LeaseRequest) (limiter.LeaseState, error) {
	return r.Acquire(ctx, st, req)
}

// Release implements limiter.Leaser.
func (RepairThenRead) Release(ctx context.Context, st store.Store, req limiter.LeaseRequest) error {
	_, err := st.Do(ctx, store.Cmd{Name: "ZREM", Args: []any{req.Key, req.ID}})
	return err
}

// CheckOnlyExtend is a correct leaser whose Extend checks that the lease
// is held and moves nothing (ZSCORE against TIME): a holder that extends
// its lease to outlive its TTL loses the slot at the first TTL, to
// another caller, while it still works.
type CheckOnlyExtend struct {
	strategy.Concurrency
}

// Extend implements limiter.Leaser, wrongly.
func (e CheckOnlyExtend) Extend(ctx context.Context, st store.Store, req limiter.LeaseRequest) (limiter.LeaseState, error) {
	rs, err := st.Do(ctx, store.Cmd{Name: "TIME"}, store.Cmd{Name: "ZSCORE", Args: []any{req.Key, req.ID}})
	if err != nil {
		return limiter.LeaseState{}, err
	}
	for _, r := range rs {
		if r.Err != nil && !errors.Is(r.Err, store.ErrNil) {
			return limiter.LeaseState{}, r.Err
		}
	}
	now, err := millis(rs[0].Val)
	if err != nil {
		return limiter.LeaseState{}, err
	}
	s, _ := rs[1].Val.(string)
	score, err := strconv.ParseFloat(s, 64)
	if err != nil || score <= float64(now) {
		return limiter.LeaseState{}, nil
	}
	return limiter.LeaseState{Held: true, InFlight: 1}, nil
}

// millis reads a TIME reply as milliseconds since the Unix epoch.
func millis(v any) (int64, error) {
	t, err := store.Slice(v)
	if err != nil || len(t) != 2 {
		return 0, fmt.Errorf("knownbad: TIME reply %v", v)
	}
	sec, err1 := store.Int64(t[0])
	usec, err2 := store.Int64(t[1])
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("knownbad: TIME reply %v", v)
	}
	return sec*1000 + usec/1000, nil
}

// CallerTTLLeases is a correct leaser whose Acquire then gives the lease
// set the caller's TTL (PEXPIRE key ttl after the ZADD), as hand-written
// ones often do: right while every caller uses one TTL. A lease with a
// shorter TTL beside a longer one cuts the set's life to its own, and when
// it ends the set goes with the longer lease in it: that slot is free
// again while its holder still works.
type CallerTTLLeases struct {
	strategy.Concurrency
}

// Acquire implements limiter.Leaser, wrongly.
func (l CallerTTLLeases) Acquire(ctx context.Context, st store.Store, req limiter.LeaseRequest) (limiter.LeaseState, error) {
	s, err := l.Concurrency.Acquire(ctx, st, req)
	if err != nil || !s.Held {
		return s, err
	}
	rs, err := st.Do(ctx, store.Cmd{Name: "PEXPIRE", Args: []any{req.Key, req.Limit.TTL.Milliseconds()}})
	if err == nil {
		err = rs[0].Err
	}
	return s, err
}

// BareTombstone is a correct leaser whose Abandon only adds the tombstone
// (the ID scored by minus its end) and leaves the set's expiry as it was:
// a set that a lease ending sooner keeps alive is deleted when that lease
// ends and takes the tombstone with it, so the abandoned Acquire, arriving
// later, takes a slot that nobody holds.
type BareTombstone struct {
	strategy.Concurrency
}

// Abandon implements limiter.LeaseAbandoner, wrongly.
func (BareTombstone) Abandon(ctx context.Context, st store.Store, req limiter.LeaseRequest) error {
	rs, err := st.Do(ctx, store.Cmd{Name: "TIME"})
	if err != nil {
		return err
	}
	now, err := millis(rs[0].Val)
	if err != nil {
		return err
	}
	rs, err = st.Do(ctx, store.Cmd{Name: "ZADD", Args: []any{req.Key, -(now + req.Limit.TTL.Milliseconds()), req.ID}})
	if err == nil {
		err = rs[0].Err
	}
	return err
}

// TTLRetryLeases is a correct leaser whose refusal says to retry after the
// caller's TTL, the longest any lease held may last, instead of when the
// oldest lease ends: a caller that waits as told waits up to a TTL longer
// than it needs to, while a slot is free.
type TTLRetryLeases struct {
	strategy.Concurrency
}

// Acquire implements limiter.Leaser, wrongly.
func (l TTLRetryLeases) Acquire(ctx context.Context, st store.Store, req limiter.LeaseRequest) (limiter.LeaseState, error) {
	s, err := l.Concurrency.Acquire(ctx, st, req)
	if err == nil && !s.Held && s.RetryAfter > 0 {
		s.RetryAfter = req.Limit.TTL
	}
	return s, err
}

// OldestRetryLeases is a correct leaser whose refusal says to retry when
// the oldest lease ends, the right time while every caller has one Max:
// for a caller whose Max is below what is held (a Max lowered while leases
// of the old one are held) a slot frees only when enough leases have
// ended, so it retries, is refused again, and retries again.
type OldestRetryLeases struct {
	strategy.Concurrency
}

// Acquire implements limiter.Leaser, wrongly.
func (l OldestRetryLeases) Acquire(ctx context.Context, st store.Store, req limiter.LeaseRequest) (limiter.LeaseState, error) {
	s, err := l.Concurrency.Acquire(ctx, st, req)
	if err != nil || s.Held || s.RetryAfter <= 0 {
		return s, err
	}
	rs, err := st.Do(ctx, store.Cmd{Name: "TIME"},
		store.Cmd{Name: "ZRANGEBYSCORE", Args: []any{req.Key, "(0", "+inf", "WITHSCORES", "LIMIT", 0, 1}})
	if err != nil {
		return s, err
	}
	now, err := millis(rs[0].Val)
	if err != nil {
		return s, err
	}
	if first, _ := store.Slice(rs[1].Val); len(first) == 2 {
		if end, err := store.Int64(first[1]); err == nil && end > now {
			s.RetryAfter = time.Duration(end-now) * time.Millisecond
		}
	}
	return s, nil
}

// UncheckedExtend is a correct leaser whose Extend reports the lease held
// whenever its renewal ran without error, as a hand-written one does that
// renews with ZADD XX, whose reply is 0 whether or not the ID was there: a
// holder whose lease expired (a long pause) and whose slot went to another
// caller is told it still holds it, and works on beside the new holder.
type UncheckedExtend struct {
	strategy.Concurrency
}

// Extend implements limiter.Leaser, wrongly.
func (e UncheckedExtend) Extend(ctx context.Context, st store.Store, req limiter.LeaseRequest) (limiter.LeaseState, error) {
	s, err := e.Concurrency.Extend(ctx, st, req)
	if err == nil {
		s.Held = true
	}
	return s, err
}

// HeldAbandonKept is a correct leaser whose Abandon leaves an ID that is
// held as it is and tombstones only one not held, on the reasoning that an
// Acquire that already arrived needs no refusal: but its caller never
// learned it holds the slot, so every Acquire whose reply was lost after it
// ran (a timeout, a reset connection) leaves a slot held by nobody until
// its TTL ends.
type HeldAbandonKept struct {
	strategy.Concurrency
}

// Abandon implements limiter.LeaseAbandoner, wrongly.
func (h HeldAbandonKept) Abandon(ctx context.Context, st store.Store, req limiter.LeaseRequest) error {
	rs, err := st.Do(ctx, store.Cmd{Name: "TIME"}, store.Cmd{Name: "ZSCORE", Args: []any{req.Key, req.ID}})
	if err != nil {
		return err
	}
	now, err := millis(rs[0].Val)
	if err != nil {
		return err
	}
	if s, ok := rs[1].Val.(string); ok {
		if score, err := strconv.ParseFloat(s, 64); err == nil && score > float64(now) {
			return nil // held: left as it is
		}
	}
	return h.Concurrency.Abandon(ctx, st, req)
}

// StrictRelease is a correct leaser whose Release is an error when it
// removes nothing (ZREM replies 0): a lease released twice (a deferred
// Release after an explicit one), after it expired, or never held fails
// its caller, who may take that for an outage or retry it forever.
type StrictRelease struct {
	strategy.Concurrency
}

// Release implements limiter.Leaser, wrongly.
func (StrictRelease) Release(ctx context.Context, st store.Store, req limiter.LeaseRequest) error {
	rs, err := st.Do(ctx, store.Cmd{Name: "ZREM", Args: []any{req.Key, req.ID}})
	if err != nil {
		return err
	}
	if rs[0].Err != nil {
		return rs[0].Err
	}
	if n, _ := store.Int64(rs[0].Val); n == 0 {
		return fmt.Errorf("knownbad: lease %s is not held", req.ID)
	}
	return nil
}
