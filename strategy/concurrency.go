package strategy

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

//go:embed lua/lease.lua
var leaseLua string

var leaseScript = store.NewScript(leaseLua)

// LeaseScript returns the script Concurrency runs, for tools that preload
// it (SCRIPT LOAD).
func LeaseScript() *store.Script { return leaseScript }

// Concurrency holds concurrency leases (limiter.Leaser): a sorted set per
// subject, one member per lease, scored by the lease's expiry on the
// server's clock.
//
// Guarantees:
//   - atomic: acquiring is one Lua script, one round trip: expired leases
//     leave, and the lease is taken only when fewer than Max unexpired
//     leases are held, however many callers contend;
//   - a crashed holder frees its slot at its lease's TTL: leases expire
//     one by one, with no process to clean up after them;
//   - acquiring a lease ID that is already held renews it and takes no
//     second slot (a retried call never holds two); Release of a released,
//     expired or unknown lease is harmless;
//   - an Acquire whose outcome is unknown (a lost reply, a timeout) is
//     abandoned (Abandon): its ID is left as a tombstone for the lease's
//     TTL, so that the Acquire, should it reach Redis only after that,
//     takes no slot;
//   - the set's key expires with its latest lease (or tombstone) when
//     that was acquired or extended; a Release (one ZREM, kept cheap)
//     does not shorten it, so after one the key may outlive its leases by
//     at most a lease's TTL; a call that finds it without a TTL gives it
//     back;
//   - a key that is not a sorted set is limiter.ErrCorruptCounter, and
//     nothing is written;
//   - time source: the Redis server's TIME, never the app server's clock;
//   - Redis 5.0 or later (or a server that runs Lua, such as miniredis).
type Concurrency struct{}

// NewConcurrency returns the Concurrency leaser.
func NewConcurrency() Concurrency { return Concurrency{} }

// Acquire implements limiter.Leaser.
func (Concurrency) Acquire(ctx context.Context, st store.Store, req limiter.LeaseRequest) (limiter.LeaseState, error) {
	return runLease(ctx, st, "a", req)
}

// Extend implements limiter.Leaser.
func (Concurrency) Extend(ctx context.Context, st store.Store, req limiter.LeaseRequest) (limiter.LeaseState, error) {
	return runLease(ctx, st, "e", req)
}

// Abandon implements limiter.LeaseAbandoner: it ends the lease, if held,
// and leaves a tombstone for req.ID that refuses an Acquire or Extend of
// it for the lease's TTL. It is one script call, as Acquire is.
func (Concurrency) Abandon(ctx context.Context, st store.Store, req limiter.LeaseRequest) error {
	_, err := runLease(ctx, st, "x", req)
	return err
}

// Release implements limiter.Leaser: one ZREM (Redis deletes the set with
// its last member). It removes req.ID whatever the set holds for it, a
// tombstone too: an ID given to Abandon is not Released after it (a
// limiter.Concurrency never does: the Lease of an abandoned Acquire is not
// held), or an Acquire of it that arrives later takes a slot.
func (Concurrency) Release(ctx context.Context, st store.Store, req limiter.LeaseRequest) error {
	rs, err := st.Do(ctx, store.Cmd{Name: "ZREM", Args: []any{req.Key, req.ID}})
	if err == nil && len(rs) == 1 {
		// the command's own error: WRONGTYPE, NOPERM, READONLY
		err = rs[0].Err
	}
	if err != nil {
		return fmt.Errorf("strategy: release lease: %w", corruptErr(err))
	}
	return nil
}

func runLease(ctx context.Context, st store.Store, op string, req limiter.LeaseRequest) (limiter.LeaseState, error) {
	v, err := leaseScript.Run(ctx, st, []string{req.Key}, []any{op, req.ID, req.Limit.Max, req.Limit.TTL.Milliseconds()})
	if err != nil {
		return limiter.LeaseState{}, fmt.Errorf("strategy: lease: %w", corruptErr(err))
	}
	nums, err := store.Int64s(v)
	if err != nil {
		return limiter.LeaseState{}, fmt.Errorf("strategy: lease: %w", err)
	}
	if len(nums) != 3 {
		return limiter.LeaseState{}, fmt.Errorf("strategy: lease: bad reply: %d values", len(nums))
	}
	return limiter.LeaseState{Held: nums[0] == 1, InFlight: nums[1], RetryAfter: time.Duration(nums[2]) * time.Millisecond}, nil
}
