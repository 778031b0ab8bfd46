package strategy

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/derive"
	"github.com/quotagate/limiter/store"
)

//go:embed lua/aligned_window.lua
var alignedWindowLua string

var alignedWindowScript = store.NewScript(alignedWindowLua)

// AlignedWindowScript returns the script AlignedWindow runs, for tools that
// preload it (SCRIPT LOAD) or benchmark it raw.
func AlignedWindowScript() *store.Script { return alignedWindowScript }

// AlignedCountBase is what an AlignedWindow counter counts down from: it
// holds AlignedCountBase − the count admitted in its window.
const AlignedCountBase = 1 << 52

// AlignedWindow counts cost per limit in windows aligned to the Unix epoch
// on the server's clock, [b·Period, (b+1)·Period), with the period (in
// milliseconds) and the window's index b ending the key ("key:60000:b"),
// decided in Lua. It is the cheapest exact strategy on the
// server: an admitted call on a window that has started is one DECR (or
// DECRBY for a cost above 1), with the limit's rate its only argument.
//
// A counter is created only by a call whose script reads the server's TIME
// and finds it in the counter's window, and it expires at the window's end
// (PEXPIREAT, set once). So a counter exists only during its own window,
// and every later call of that window counts with one DECR, without
// reading the clock; the reset time is known from the window's index. A
// counter counts down from AlignedCountBase (2^52): it holds 2^52 − the
// count, whatever the Rate, so that a rule whose rate changes (its name and
// period kept) keeps its window's count.
//
// Guarantees:
//   - atomic: one Lua script, one round trip, all limits of a call decided
//     together; a request denied by any limit consumes nothing from any;
//   - exact: under any contention, at most Rate is admitted per window, and
//     a denial never rests on another call's transient count;
//   - windows by the server's clock, never sliding: the app server names
//     the window from its clock (WithAlignedClock, default the system
//     clock) plus its offset to Redis TIME, sampled on first use and
//     refreshed by every call that creates a counter; a call sent for a
//     window the server's clock is not in (a skewed app clock, a call
//     racing a window's end) is counted nowhere and sent again for the
//     server's window, up to 4 times, then denied until the window ends
//     with ErrStaleWindow as the Result's Cause; but Redis keeps a key
//     through the millisecond its expiry names, so a counter still exists
//     in the next window's first millisecond, and a call that reaches the
//     server then, named from an estimate behind it, counts in the window
//     that ended: up to one millisecond's calls more at a window's start
//     (a known limit, to be closed);
//   - a counter that is not a non-negative decimal integer (or a key of
//     another type) is limiter.ErrCorruptCounter, and every counter is left
//     as it was found; so is one above AlignedCountBase (a count below
//     zero, never written by the strategy);
//   - every key has a TTL from the command that creates it, and lives no
//     longer than its window; a counter found without one (stripped by
//     hand) is given its window's end back by the next denial. Until then
//     it stays, but windows are named by index: after its window only a
//     call whose estimate of the server's clock lags (by the offset's
//     error, milliseconds) names it;
//   - every denial has RetryAfter of at least 1 ms (or -1 for a cost above
//     a Rate, decided without writing);
//   - boundary bursts: up to 2×Rate in any interval one Period long, as any
//     fixed window;
//   - no grace past a window's end (Bucketed has one): after a failover to
//     a replica whose clock runs ahead of the old primary's, a window's
//     counter may expire early and start again, admitting up to one more
//     Rate in that window;
//   - round trips: 1, plus one TIME per store on first use and one more per
//     window move; Limiter.AllowMany sends many decisions in one batch (on
//     one server in one call of the script's many-request companion), the
//     calls named for another window than the server's going again in the
//     next batch;
//   - keys per decision: one per limit, in one Cluster slot;
//   - Periods of whole milliseconds, as the Limiter requires;
//   - Redis 5.0 or later (or a server that runs Lua, such as miniredis).
type AlignedWindow struct {
	epochClock
}

// AlignedWindowOption configures an AlignedWindow.
type AlignedWindowOption func(*AlignedWindow)

// WithAlignedClock sets the app clock AlignedWindow aligns to Redis TIME
// (default: the system clock, read once and then as the monotonic time
// since, which no step of the wall clock moves). Only its Unix time is
// used, never its location. A step of the clock is found out by the next
// call that names a window the server's clock is not in; but the time left
// in a window that a call reports without reading the server's clock
// (ResetAfter, which a quota lease lives by) is measured on this clock
// since the last reading: a clock that steps back within a window (the
// wall clock, time.Now, under an NTP step) makes it up to the step too
// long until the next reading.
func WithAlignedClock(now func() time.Time) AlignedWindowOption {
	return func(a *AlignedWindow) {
		if now != nil {
			a.now, a.own = now, true
		}
	}
}

// NewAlignedWindow returns the AlignedWindow strategy.
func NewAlignedWindow(opts ...AlignedWindowOption) *AlignedWindow {
	a := &AlignedWindow{epochClock: newEpochClock("aligned window")}
	for _, o := range opts {
		if o != nil { // an option chosen conditionally and left unset
			o(a)
		}
	}
	return a
}

// DerivesKeys tells the Limiter that Decide names its keys with
// limiter.Request.AppendKey (each window's key extends the request's key),
// so that the Limiter builds no key of its own for a decision. It is
// internal to this module (its argument's type is) and returns a: a type
// that embeds an AlignedWindow gets Request.Keys built.
func (a *AlignedWindow) DerivesKeys(derive.Token) any { return a }

// Decide implements limiter.Strategy.
func (a *AlignedWindow) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	c := a.clockFor(st)
	now, t0, err := a.serverNowAt(ctx, st, c)
	if err != nil {
		return limiter.Result{}, err
	}
	n := len(req.Limits)
	pb := alignedBufs.Get().(*alignedBuf)
	ints := pb.ints[:]
	args, write := alignedArgs(req, ints)
	clear(pb.keys[:n]) // names of an earlier call's keys
	bs := buckets{idx: pb.idx[:n], keys: pb.keys[:n], aligned: true}
	before, after := pb.before[:n], pb.after[:n] // each set before it is read
	for attempt := 1; ; attempt++ {
		bs.stamp(&req, now)
		if attempt > 1 {
			t0 = a.now()
		}
		nums, err := alignedWindowScript.RunInt64s(ctx, st, bs.keys, args, ints[len(args):len(args)])
		if err != nil {
			return limiter.Result{}, fmt.Errorf("strategy: aligned window: %w", corruptErr(err))
		}
		res, again, err := a.read(c, req, &bs, write, &now, t0, attempt, nums, before, after)
		if err != nil {
			return limiter.Result{}, err
		}
		if again {
			continue
		}
		alignedBufs.Put(pb) // after read, which reads bs
		return res, nil
	}
}

// alignedArgs puts req's arguments in ints and returns them, and whether
// the call writes. A read sends nothing; a counting call each limit's
// rate, after the cost unless it is 1 (each argument costs the server
// time; the windows' bounds are in their keys).
func alignedArgs(req limiter.Request, ints []int64) ([]int64, bool) {
	write := !req.DryRun && req.Cost > 0 && !neverFits(req)
	nargs := 0
	if write {
		if req.Cost != 1 {
			ints[0] = req.Cost
			nargs = 1
		}
		for _, l := range req.Limits {
			ints[nargs] = l.Rate
			nargs++
		}
	}
	return ints[:nargs:nargs], write
}

// read reads the reply nums to the attempt-th call for req, whose windows
// bs named from *now, the estimate of the server's clock (µs), the call
// sent at t0 on the app clock. It returns the decision; or again, when the
// server's clock was in another window than the call named (counted
// nowhere), with *now moved to the estimate to name the windows from on
// the next attempt. After maxStamps attempts such a call is denied with
// ErrStaleWindow as its Cause. before and after have room for a value per
// limit.
func (a *AlignedWindow) read(c *serverClock, req limiter.Request, bs *buckets, write bool, now *int64, t0 time.Time, attempt int, nums, before, after []int64) (limiter.Result, bool, error) {
	n := len(req.Limits)
	if len(nums) == 3 && nums[0] == -1 {
		// The server's clock is not in a window this call would have
		// created, or (a read) in the window of a counter it found
		// missing: counted nowhere. (No other reply starts with a
		// negative number.) Name the windows again for the
		// server's time when the next attempt arrives: now on the app
		// clock, plus the offset just observed, plus half a round trip (a
		// window about as short as the round trip would otherwise end
		// before every attempt arrives).
		*now = nums[1]*1_000_000 + nums[2]
		t1 := a.now()
		c.observe(t0, t1, *now)
		if attempt < maxStamps {
			*now = max(*now, a.now().UnixMicro()+c.offset.Load()+t1.Sub(t0).Microseconds()/2)
			return limiter.Result{}, true, nil
		}
		for i := range n {
			before[i] = 0
		}
		res := bindBuckets(req, bs, *now, before, before, false, true)
		res.Cause = ErrStaleWindow
		return res, false, nil
	}
	if !write {
		if len(nums) != n {
			return limiter.Result{}, false, fmt.Errorf("strategy: aligned window: %d values for %d limits", len(nums), n)
		}
		allowed := true
		for i, l := range req.Limits {
			before[i] = 0
			if nums[i] > AlignedCountBase {
				// a count below zero, as a counting call finds it
				return limiter.Result{}, false, fmt.Errorf("strategy: aligned window: %w: count %d for limit %d", limiter.ErrCorruptCounter, AlignedCountBase-nums[i], i+1)
			}
			if nums[i] > 0 {
				// a counter holds 2^52 - the count
				before[i] = AlignedCountBase - nums[i]
			}
			allowed = allowed && fits(before[i], req.Cost, l.Rate)
		}
		return bindBuckets(req, bs, *now, before, before, allowed, false), false, nil
	}
	if len(nums) < n {
		return limiter.Result{}, false, fmt.Errorf("strategy: aligned window: %d values for %d limits", len(nums), n)
	}
	if n == 1 && len(nums) == 1 {
		// The common call: what the counter holds after taking the cost,
		// 2^52 - the count.
		nums[0] = AlignedCountBase - nums[0]
	}
	allowed := true
	for i, l := range req.Limits {
		after[i] = nums[i]
		if after[i] < req.Cost {
			// a counter above its rate, which the script never writes: a
			// count below zero
			return limiter.Result{}, false, fmt.Errorf("strategy: aligned window: %w: count %d for limit %d and cost %d", limiter.ErrCorruptCounter, after[i], i+1, req.Cost)
		}
		before[i] = after[i] - req.Cost
		allowed = allowed && after[i] <= l.Rate
	}
	at := *now
	switch {
	case !allowed && len(nums) == n+1:
		// the server's clock, in milliseconds, from a counter's TTL
		at = nums[n] * 1000
	case allowed && len(nums) == n+2:
		at = nums[n]*1_000_000 + nums[n+1]
		c.observe(t0, a.now(), at)
	case allowed && len(nums) == n:
		// No clock read on the server: the time left in each window counts
		// from the latest time the server's clock may show, not from the
		// estimate, so that it is never longer than the server's (a quota
		// lease lives by it: limiter.WindowQuota).
		at = max(at, c.latestAt(t0))
	case !allowed || len(nums) != n:
		return limiter.Result{}, false, fmt.Errorf("strategy: aligned window: %d values for %d limits (admitted: %v)", len(nums), n, allowed)
	}
	if allowed {
		return bindBuckets(req, bs, at, before, after, true, false), false, nil
	}
	return bindBuckets(req, bs, at, before, before, false, false), false, nil
}

// DecideRounds decides reqs for Limiter.AllowMany, each as Decide would:
// every request's call goes in one batch (send), and those the server
// answers with another window than the call named go again, named anew, in
// the next batch, up to maxStamps calls each. Requests that share a
// counter (a subject asked twice) are decided in their order, as the same
// calls one after another (one made again in a later round would
// otherwise find the quota taken by a later request sent beside it): a
// call is sent once every earlier call sharing one of its windows has its
// outcome, or (many: send packs the calls in many-request script calls)
// goes in the same many-request call, whose script answers a request that
// names a key of an earlier one answered "another window" so too,
// uncounted. The server's clock is read first on a store it has not been
// read on (TIME). The method takes a type only this module can name.
func (a *AlignedWindow) DecideRounds(_ derive.Token, ctx context.Context, st store.Store, reqs []limiter.Request, send func([]derive.Call) []store.Reply, many bool, out []limiter.Answer) {
	c := a.clockFor(st)
	now, t0, err := a.serverNowAt(ctx, st, c)
	if err != nil {
		for i := range reqs {
			out[i].Err = err
		}
		return
	}
	// Each request's arguments, boxed (rates recur: shared boxes), its
	// windows' indexes and keys, and the estimate they are named from;
	// the requests' arguments, indexes and keys share one array each.
	type call struct {
		i       int
		now     int64
		write   bool
		args    []any
		bs      buckets
		attempt int   // calls made
		after   []int // the calls (by i) sharing a window with it, earlier, whose outcomes it waits for
	}
	limits := 0
	for _, req := range reqs {
		limits += len(req.Limits)
	}
	todo := make([]call, len(reqs))
	idx, keys := make([]int64, limits), make([]string, limits)
	argv := make([]any, 0, limits+len(reqs))
	var ints [1 + limiter.MaxLimits]int64
	for i, req := range reqs {
		args, write := alignedArgs(req, ints[:])
		a0 := len(argv)
		for _, v := range args {
			argv = append(argv, boxes.Box(v))
		}
		n := len(req.Limits)
		todo[i] = call{i: i, now: now, write: write, args: argv[a0:len(argv):len(argv)],
			bs: buckets{idx: idx[:n:n], keys: keys[:n:n], aligned: true}}
		idx, keys = idx[n:], keys[n:]
	}
	// Windows named from one estimate are the same key exactly when they
	// are the same counter.
	var last map[string]int // a window's key -> the latest request using it
	for k := range todo {
		t := &todo[k]
		t.bs.stamp(&reqs[t.i], t.now)
		if len(todo) == 1 {
			break
		}
		if last == nil {
			last = make(map[string]int, limits)
		}
		for _, key := range t.bs.keys {
			if j, ok := last[key]; ok && !slices.Contains(t.after, j) {
				t.after = append(t.after, j)
			}
			last[key] = t.i
		}
	}
	done := make([]bool, len(reqs))
	part := make([]int, len(reqs)) // the many-request call a request goes in this round (by i), or -1
	calls := make([]derive.Call, 0, len(todo))
	sent := make([]int, 0, len(todo)) // the todo index of each call sent
	var before, after [limiter.MaxLimits]int64
	var nums []int64
	for round := 1; len(todo) > 0; round++ {
		calls, sent = calls[:0], sent[:0]
		for k := range todo {
			t := &todo[k]
			p := len(calls) / derive.ManyPerCall
			part[t.i] = -1
			if slices.ContainsFunc(t.after, func(j int) bool { return !done[j] && (!many || part[j] != p) }) {
				continue
			}
			part[t.i] = p
			t.bs.stamp(&reqs[t.i], t.now)
			t.attempt++
			calls, sent = append(calls, derive.Call{Script: alignedWindowScript, Keys: t.bs.keys, Args: t.args}), append(sent, k)
		}
		if round > 1 {
			t0 = a.now()
		}
		replies := send(calls)
		for n, k := range sent {
			t := &todo[k]
			done[t.i] = true
			r := replies[n]
			if r.Err != nil {
				out[t.i].Err = fmt.Errorf("strategy: aligned window: %w", corruptErr(r.Err))
				continue
			}
			if nums, err = store.AppendInt64s(nums[:0], r.Val); err != nil {
				out[t.i].Err = fmt.Errorf("strategy: aligned window: %w", err)
				continue
			}
			res, more, err := a.read(c, reqs[t.i], &t.bs, t.write, &t.now, t0, t.attempt, nums, before[:], after[:])
			switch {
			case err != nil:
				out[t.i].Err = err
			case more:
				done[t.i] = false
			default:
				out[t.i].Result = res
			}
		}
		todo = slices.DeleteFunc(todo, func(t call) bool { return done[t.i] })
	}
}

// ManyScript returns the many-request companion of AlignedWindow's script
// (Limiter.AllowMany packs up to 64 decisions in one call of it on a store
// that reaches one server), or nil for another script.
func (*AlignedWindow) ManyScript(s *store.Script) *store.Script { return manyScripts[s] }

// alignedBuf holds a decision's arguments and reply, and its keys: a
// store keeps none of them after a call (the store.Store contract). After
// a failed call the buffer is left to the garbage collector, in case a
// store's abandoned work still holds it.
type alignedBuf struct {
	ints          [1 + limiter.MaxLimits + limiter.MaxLimits + 2]int64
	idx           [limiter.MaxLimits]int64
	before, after [limiter.MaxLimits]int64
	keys          [limiter.MaxLimits]string
}

var alignedBufs = sync.Pool{New: func() any { return new(alignedBuf) }}

// ResetRequest implements limiter.RequestResetter: it deletes the keys of
// the current window, and of the windows on either side, of every limit,
// the current one named by the server's clock, read first (two round
// trips: TIME, then DEL).
func (a *AlignedWindow) ResetRequest(ctx context.Context, st store.Store, req limiter.Request) error {
	return a.resetWindows(ctx, st, req, true)
}

// AlignedWindowKey returns the name of AlignedWindow's counter of window
// index (the window [index·period, (index+1)·period) since the Unix epoch)
// of a limit whose key is key (limiter.Key): key + ":" + the period in
// milliseconds + ":" + index. Tools and tests use it to inspect counters.
func AlignedWindowKey(key string, period time.Duration, index int64) string {
	return alignedKey(key, max(period.Milliseconds(), 0), index)
}

// alignedKey is key + ":" + period + ":" + idx, the period in milliseconds:
// AlignedWindow's script reads a window's bounds from its key, so that the
// common call sends the fewest arguments.
func alignedKey(key string, period, idx int64) string { return windowKey(key, period, idx) }
