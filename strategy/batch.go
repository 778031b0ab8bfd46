package strategy

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/argcache"
	"github.com/quotagate/limiter/internal/derive"
	"github.com/quotagate/limiter/store"
)

// The scripted strategies implement limiter.ScriptStrategy, so that
// Limiter.AllowMany can send many of their decisions in one round trip.
// Their BatchScript builds the same arguments as Decide, and BatchResult
// reads the same reply.

// BatchesItself marks FixedWindow's Decide as its BatchScript's call.
func (s FixedWindow) BatchesItself(derive.Token) any { return s }

// BatchScript implements limiter.ScriptStrategy.
func (FixedWindow) BatchScript(req limiter.Request) (*store.Script, []any, error) {
	args, err := intArgs(req, fixedWindowParams)
	return fixedWindowScript, args, err
}

// BatchResult implements limiter.ScriptStrategy.
func (FixedWindow) BatchResult(req limiter.Request, r store.Reply) (limiter.Result, error) {
	return batchResult(req, r, "fixed window", fixedWindowBind)
}

// The many-request companions of the scripts (limiter.ManyScriptStrategy),
// each generated from its script (see TestManyScripts): it decides
// several requests in one call, each as the script alone would.
var (
	//go:embed lua/fixed_window_many.lua
	fixedWindowManyLua string
	//go:embed lua/gcra_many.lua
	gcraManyLua string
	//go:embed lua/sliding_window_many.lua
	slidingWindowManyLua string
	//go:embed lua/token_bucket_many.lua
	tokenBucketManyLua string
	//go:embed lua/sliding_log_many.lua
	slidingLogManyLua string
	//go:embed lua/aligned_window_many.lua
	alignedWindowManyLua string
)

// manyScripts maps each script to its many-request companion.
var manyScripts = map[*store.Script]*store.Script{
	fixedWindowScript:   store.NewScript(fixedWindowManyLua),
	gcraScript:          store.NewScript(gcraManyLua),
	slidingWindowScript: store.NewScript(slidingWindowManyLua),
	tokenBucketScript:   store.NewScript(tokenBucketManyLua),
	slidingLogScript:    store.NewScript(slidingLogManyLua),
	alignedWindowScript: store.NewScript(alignedWindowManyLua),
}

// ManyScript implements limiter.ManyScriptStrategy.
func (FixedWindow) ManyScript(s *store.Script) *store.Script { return manyScripts[s] }

// ManyScript implements limiter.ManyScriptStrategy.
func (GCRA) ManyScript(s *store.Script) *store.Script { return manyScripts[s] }

// ManyScript implements limiter.ManyScriptStrategy.
func (SlidingWindow) ManyScript(s *store.Script) *store.Script { return manyScripts[s] }

// ManyScript implements limiter.ManyScriptStrategy.
func (TokenBucket) ManyScript(s *store.Script) *store.Script { return manyScripts[s] }

// ManyScript implements limiter.ManyScriptStrategy.
func (SlidingLog) ManyScript(s *store.Script) *store.Script { return manyScripts[s] }

// BatchesItself marks GCRA's Decide as its BatchScript's call.
func (s GCRA) BatchesItself(derive.Token) any { return s }

// BatchScript implements limiter.ScriptStrategy.
func (GCRA) BatchScript(req limiter.Request) (*store.Script, []any, error) {
	args, err := intArgs(req, gcraParams)
	return gcraScript, args, err
}

// BatchResult implements limiter.ScriptStrategy.
func (GCRA) BatchResult(req limiter.Request, r store.Reply) (limiter.Result, error) {
	return batchResult(req, r, "gcra", bindByBurst)
}

// BatchesItself marks SlidingWindow's Decide as its BatchScript's call.
func (s SlidingWindow) BatchesItself(derive.Token) any { return s }

// BatchScript implements limiter.ScriptStrategy.
func (SlidingWindow) BatchScript(req limiter.Request) (*store.Script, []any, error) {
	args, err := intArgs(req, slidingWindowParams)
	return slidingWindowScript, args, err
}

// BatchResult implements limiter.ScriptStrategy.
func (SlidingWindow) BatchResult(req limiter.Request, r store.Reply) (limiter.Result, error) {
	return batchResult(req, r, "sliding window", bindByRate)
}

// BatchesItself marks TokenBucket's Decide as its BatchScript's call.
func (s TokenBucket) BatchesItself(derive.Token) any { return s }

// BatchScript implements limiter.ScriptStrategy.
func (TokenBucket) BatchScript(req limiter.Request) (*store.Script, []any, error) {
	args, err := tokenBucketArgs(req)
	return tokenBucketScript, boxed(args, true), err
}

// BatchResult implements limiter.ScriptStrategy.
func (TokenBucket) BatchResult(req limiter.Request, r store.Reply) (limiter.Result, error) {
	return batchResult(req, r, "token bucket", bindByBurst)
}

// BatchesItself marks SlidingLog's Decide as its BatchScript's call.
func (s SlidingLog) BatchesItself(derive.Token) any { return s }

// BatchScript implements limiter.ScriptStrategy.
func (SlidingLog) BatchScript(req limiter.Request) (*store.Script, []any, error) {
	args, err := slidingLogArgs(req)
	// (its nonce differs from call to call: nothing to keep boxed)
	return slidingLogScript, boxed(args, false), err
}

// BatchResult implements limiter.ScriptStrategy.
func (SlidingLog) BatchResult(req limiter.Request, r store.Reply) (limiter.Result, error) {
	return batchResult(req, r, "sliding log", bindAll)
}

// intArgs returns {cost, peek, a_1, b_1, ...} for req with (a_i, b_i) =
// params(limit i), or {a_1, b_1, ...} alone for a cost of 1 that writes
// (argHead), boxed for a store.Cmd.
func intArgs(req limiter.Request, params func(limiter.Limit) (int64, int64, error)) ([]any, error) {
	h, head := argHead(req)
	args := make([]any, 0, head+2*len(req.Limits))
	for _, v := range h[:head] {
		args = append(args, boxes.Box(v))
	}
	for _, l := range req.Limits {
		a, b, err := params(l)
		if err != nil {
			return nil, err
		}
		args = append(args, boxes.Box(a), boxes.Box(b))
	}
	return args, nil
}

// boxes keeps the boxes of recent integer arguments: a limit's rate,
// period and burst recur from call to call, and each box of an integer
// of 256 or more is an allocation (a box is never changed, so calls share
// them).
var boxes argcache.Boxes

// boxed returns ints as a []any for a store.Cmd, from boxes when recur.
func boxed(ints []int64, recur bool) []any {
	out := make([]any, len(ints))
	for i, v := range ints {
		if recur {
			out[i] = boxes.Box(v)
		} else {
			out[i] = v
		}
	}
	return out
}

// batchResult reads the reply r of script name to req with bind.
func batchResult(req limiter.Request, r store.Reply, name string, bind func([]int64, limiter.Request) (limiter.Result, error)) (limiter.Result, error) {
	if r.Err != nil {
		return limiter.Result{}, fmt.Errorf("strategy: %s: %w", name, corruptErr(r.Err))
	}
	nums, err := store.AppendInt64s(nil, r.Val)
	if err != nil {
		return limiter.Result{}, fmt.Errorf("strategy: %s: %w", name, err)
	}
	return bind(nums, req)
}

func bindAll(nums []int64, req limiter.Request) (limiter.Result, error) {
	return bindInts(nums, len(req.Limits))
}

// bindByBurst reads a reply {allowed, remaining, reset_ms, retry_ms, ...}
// or, for one limit that admits, reset_ms·(burst+1) + remaining as one
// integer (GCRA, TokenBucket).
func bindByBurst(nums []int64, req limiter.Request) (limiter.Result, error) {
	return bindPacked(nums, req, burstOf)
}

// bindByRate is bindByBurst with the rate in the burst's place
// (SlidingWindow, whose remaining is at most its Rate).
func bindByRate(nums []int64, req limiter.Request) (limiter.Result, error) {
	return bindPacked(nums, req, func(l limiter.Limit) int64 { return l.Rate })
}

// bindPacked reads either reply, the packed one with radix most(limit)+1.
func bindPacked(nums []int64, req limiter.Request, most func(limiter.Limit) int64) (limiter.Result, error) {
	if len(nums) != 1 || len(req.Limits) != 1 {
		return bindInts(nums, len(req.Limits))
	}
	reset, remaining, err := unpack(nums[0], most(req.Limits[0])+1)
	if err != nil {
		return limiter.Result{}, err
	}
	four := [4]int64{1, remaining, reset, 0}
	return bindInts(four[:], 1)
}

// unpack splits a script's reply that packs two values into one integer,
// hi·m + lo with 0 <= lo < m (no table to build on the server).
func unpack(v, m int64) (hi, lo int64, err error) {
	if v < 0 {
		return 0, 0, fmt.Errorf("strategy: bad reply %d (want hi·%d + lo)", v, m)
	}
	return v / m, v % m, nil
}

// fixedWindowBind reads any of FixedWindow's replies.
func fixedWindowBind(nums []int64, req limiter.Request) (limiter.Result, error) {
	switch {
	case len(nums) == 1 && len(req.Limits) == 1:
		// {count, reset_ms} as one integer: reset_ms·(2·rate+1) + count
		reset, count, err := unpack(nums[0], 2*req.Limits[0].Rate+1)
		if err != nil {
			return limiter.Result{}, err
		}
		pair := [2]int64{count, reset}
		return bindCounts(pair[:], req)
	case len(nums) == 2*len(req.Limits):
		return bindCounts(nums, req)
	}
	return bindInts(nums, len(req.Limits))
}

// WindowQuota implements limiter.WindowQuota: units are counted in a
// window that ends when the counter expires.
func (FixedWindow) WindowQuota() {}

// WindowQuota implements limiter.WindowQuota: units are counted in a
// window that ends when the counter expires.
func (*Optimistic) WindowQuota() {}

// WindowQuota implements limiter.WindowQuota: units are counted in the
// epoch-aligned window their transaction's TIME names.
func (*Bucketed) WindowQuota() {}

// WindowQuota implements limiter.WindowQuota: units are counted in the
// epoch-aligned window the server's clock is in when they are counted, and
// an admitted decision's ResetAfter counts from the latest time the
// server's clock may show.
func (*AlignedWindow) WindowQuota() {}

// TransientDenials implements limiter.TransientDenials: a denied request's
// cost is counted until its second transaction takes it back.
func (*Bucketed) TransientDenials() {}

// decideArgs runs script with the arguments args builds for req (with room
// for the reply after them) and reads its {allowed, remaining, reset_ms,
// retry_ms, ...} reply with bind.
func decideArgs(ctx context.Context, st store.Store, req limiter.Request, script *store.Script, name string, args func(limiter.Request) ([]int64, error), bind func([]int64, limiter.Request) (limiter.Result, error)) (limiter.Result, error) {
	a, err := args(req)
	if err != nil {
		return limiter.Result{}, err
	}
	nums, err := script.RunInt64s(ctx, st, req.Keys, a, a[len(a):len(a)])
	if err != nil {
		return limiter.Result{}, fmt.Errorf("strategy: %s: %w", name, corruptErr(err))
	}
	return bind(nums, req)
}
