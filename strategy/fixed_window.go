package strategy

import (
	"context"
	_ "embed"
	"fmt"
	"sync"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

//go:embed lua/fixed_window.lua
var fixedWindowLua string

var fixedWindowScript = store.NewScript(fixedWindowLua)

// FixedWindowScript returns the script FixedWindow runs, for tools that
// preload it (SCRIPT LOAD) or benchmark it raw.
func FixedWindowScript() *store.Script { return fixedWindowScript }

// FixedWindow counts cost per limit in a window that starts with the first
// admitted request of a counter and lasts the limit's Period.
//
// Guarantees:
//   - atomic: one Lua script, one round trip, all limits of a call decided
//     together; a request denied by any limit consumes nothing from any;
//   - exact: under any contention, at most Rate is admitted per window;
//   - the window never slides: the counter's expiry is set when it is
//     created and never moved later; a counter found without expiry, or
//     with one further than its Period (the limit's Period was shortened),
//     is expired one Period from the next writing call (a peek, which
//     writes nothing, reports such a window as long as it is, so that its
//     RetryAfter holds);
//   - a counter that is not a non-negative decimal integer (or a key of
//     another type) is limiter.ErrCorruptCounter, and the call writes
//     nothing to any limit;
//   - every denial has RetryAfter of at least 1 ms (or -1), exact: the
//     counter's PTTL, after which its window is over (Redis keeps a key
//     through the millisecond its expiry names, PTTL 0: that millisecond
//     is the next window's, and a call in it starts that window);
//   - time source: Redis key expiry, never the app server's clock;
//   - boundary bursts: up to 2×Rate in any interval one Period long, at the
//     edge of two windows (use GCRA or a sliding window to avoid it);
//   - keys per decision: one per limit, in one Cluster slot;
//   - Redis 5.0 or later (or a server that runs Lua, such as miniredis).
type FixedWindow struct{}

// NewFixedWindow returns the FixedWindow strategy.
func NewFixedWindow() FixedWindow { return FixedWindow{} }

// Decide implements limiter.Strategy.
func (FixedWindow) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	return decideInts(ctx, st, req, fixedWindowScript, "fixed window", fixedWindowParams, fixedWindowBind)
}

// fixedWindowParams returns the script's arguments for l: its rate and
// window in milliseconds.
func fixedWindowParams(l limiter.Limit) (rate, window int64, err error) {
	return l.Rate, l.Period.Milliseconds(), nil
}

// decideInts runs script, whose arguments are {cost, peek, a_1, b_1, a_2,
// ...} with (a_i, b_i) = params(limit i), or {a_1, b_1, ...} alone for a
// cost of 1 that writes (argHead), and whose integer reply bind
// reads, with one pooled buffer for the
// arguments and the reply: stores keep neither after a call (the
// store.Store contract). After a failed call the buffer is left to the
// garbage collector, in case a store's abandoned work still holds it.
func decideInts(ctx context.Context, st store.Store, req limiter.Request, script *store.Script, name string, params func(limiter.Limit) (int64, int64, error), bind func([]int64, limiter.Request) (limiter.Result, error)) (limiter.Result, error) {
	n := len(req.Limits)
	pb := intBufs.Get().(*intBuf)
	ints := pb[:]
	if len(ints) < 2+2*n+1+3*n {
		ints = make([]int64, 2+2*n+1+3*n)
	}
	h, head := argHead(req)
	args := ints[: head+2*n : head+2*n]
	copy(args, h[:head])
	for i, l := range req.Limits {
		a, b, err := params(l)
		if err != nil {
			intBufs.Put(pb)
			return limiter.Result{}, err
		}
		args[head+2*i], args[head+1+2*i] = a, b
	}
	nums, err := script.RunInt64s(ctx, st, req.Keys, args, ints[len(args):len(args)])
	if err != nil {
		return limiter.Result{}, fmt.Errorf("strategy: %s: %w", name, corruptErr(err))
	}
	res, err := bind(nums, req)
	intBufs.Put(pb)
	return res, err
}

// argHead returns the arguments the scripts of decideInts and TokenBucket's
// take before the limits', and how many: {cost, peek}, or none for a cost
// of 1 that writes, the common call. Each argument costs the server time
// (Redis makes a Lua string of it); the scripts tell the two forms apart
// by their number.
func argHead(req limiter.Request) (head [2]int64, n int) {
	if req.Cost == 1 && !req.DryRun {
		return head, 0
	}
	head[0] = req.Cost
	if req.DryRun {
		head[1] = 1
	}
	return head, 2
}

// bindCounts reads the {count_1, reset_ms_1, count_2, ...} reply that
// FixedWindow's script gives a call that writes a cost every limit can
// fit: count_i is limit i's counter after adding the cost, which the
// script took back from every limit when any count exceeds its rate.
func bindCounts(nums []int64, req limiter.Request) (limiter.Result, error) {
	if req.DryRun || req.Cost <= 0 {
		return limiter.Result{}, fmt.Errorf("strategy: bad reply: %d values for %d limits", len(nums), len(req.Limits))
	}
	allowed := true
	for i, l := range req.Limits {
		count, reset := nums[2*i], nums[2*i+1]
		if req.Cost > l.Rate || count < req.Cost || reset <= 0 {
			return limiter.Result{}, fmt.Errorf("strategy: bad reply {%d, %d} for limit %d, cost %d and rate %d", count, reset, i+1, req.Cost, l.Rate)
		}
		allowed = allowed && count <= l.Rate
	}
	var b limiter.Binder
	for i, l := range req.Limits {
		count, reset := nums[2*i], time.Duration(nums[2*i+1])*time.Millisecond
		var retry time.Duration
		if count > l.Rate {
			retry = reset
		}
		if !allowed {
			count -= req.Cost
		}
		b.Add(i, l.Rate-count, reset, retry)
	}
	return b.Result(allowed), nil
}

// intBuf holds the arguments and reply of a decision with up to two limits.
type intBuf [2 + 2*2 + 1 + 3*2]int64

var intBufs = sync.Pool{New: func() any { return new(intBuf) }}

// bindInts reads a {allowed, remaining, reset_ms, retry_ms, ...} reply.
func bindInts(nums []int64, n int) (limiter.Result, error) {
	if len(nums) != 1+3*n {
		return limiter.Result{}, fmt.Errorf("strategy: bad reply: %d values for %d limits", len(nums), n)
	}
	var b limiter.Binder
	for i := 0; i < n; i++ {
		retry := time.Duration(nums[3+3*i]) * time.Millisecond
		if nums[3+3*i] < 0 {
			retry = -1
		}
		b.Add(i, nums[1+3*i], time.Duration(nums[2+3*i])*time.Millisecond, retry)
	}
	return b.Result(nums[0] == 1), nil
}
