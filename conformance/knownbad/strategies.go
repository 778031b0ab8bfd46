package knownbad

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/derive"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// GetThenIncr is the first design most write: read, decide in the app, write.
// Limits are checked one by one.
type GetThenIncr struct{}

// Decide implements limiter.Strategy, wrongly.
func (GetThenIncr) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	var b limiter.Binder
	allowed := true
	for i, l := range req.Limits {
		rs, err := st.Do(ctx, store.Cmd{Name: "GET", Args: []any{req.Keys[i]}})
		if err != nil {
			return limiter.Result{}, err
		}
		n, err := store.Int64(rs[0].Val)
		exists := err == nil
		if !exists && !errors.Is(rs[0].Err, store.ErrNil) {
			return limiter.Result{}, fmt.Errorf("knownbad: GET: %v %w", rs[0].Err, err)
		}
		switch {
		case n+req.Cost > l.Rate || req.Cost > l.Rate:
			retry := l.Period
			if req.Cost > l.Rate {
				retry = -1
			}
			b.Add(i, l.Rate-n, l.Period, retry)
			allowed = false
			continue
		case req.Cost == 0 || req.DryRun:
		case !exists:
			_, err = st.Do(ctx, store.Cmd{Name: "SET", Args: []any{req.Keys[i], req.Cost, "PX", l.Period.Milliseconds()}})
		default:
			_, err = st.Do(ctx, store.Cmd{Name: "INCRBY", Args: []any{req.Keys[i], req.Cost}})
		}
		if err != nil {
			return limiter.Result{}, err
		}
		b.Add(i, l.Rate-n-req.Cost, l.Period, 0)
	}
	return b.Result(allowed), nil
}

// IncrThenExpire is the "simplified" design: INCRBY, then PEXPIRE on
// every call, then compare.
type IncrThenExpire struct{}

// Decide implements limiter.Strategy, wrongly.
func (IncrThenExpire) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	return incrThenExpire(ctx, st, req, false)
}

// incrThenExpire counts with INCRBY and moves the expiry with PEXPIRE on
// every call, in one pipeline, or in two round trips when twoTrips, then
// compares.
func incrThenExpire(ctx context.Context, st store.Store, req limiter.Request, twoTrips bool) (limiter.Result, error) {
	var b limiter.Binder
	allowed := true
	for i, l := range req.Limits {
		var n int64
		if req.Cost == 0 || req.DryRun {
			rs, err := st.Do(ctx, store.Cmd{Name: "GET", Args: []any{req.Keys[i]}})
			if err != nil {
				return limiter.Result{}, err
			}
			n, _ = store.Int64(rs[0].Val)
			n += req.Cost
		} else {
			incr := store.Cmd{Name: "INCRBY", Args: []any{req.Keys[i], req.Cost}}
			expire := store.Cmd{Name: "PEXPIRE", Args: []any{req.Keys[i], l.Period.Milliseconds()}}
			cmds := []store.Cmd{incr, expire}
			if twoTrips {
				cmds = cmds[:1]
			}
			rs, err := st.Do(ctx, cmds...)
			if err != nil {
				return limiter.Result{}, err
			}
			if n, err = store.Int64(rs[0].Val); err != nil {
				return limiter.Result{}, fmt.Errorf("knownbad: INCRBY: %v %w", rs[0].Err, err)
			}
			if twoTrips {
				if _, err := st.Do(ctx, expire); err != nil {
					return limiter.Result{}, err
				}
			}
		}
		retry := time.Duration(0)
		if n > l.Rate {
			allowed, retry = false, l.Period
			if req.Cost > l.Rate {
				retry = -1
			}
		}
		b.Add(i, l.Rate-n, l.Period, retry)
	}
	return b.Result(allowed), nil
}

//go:embed lua/rule_by_rule.lua
var ruleByRuleLua string

var ruleByRuleScript = store.NewScript(ruleByRuleLua)

//go:embed lua/repair_at_denial.lua
var repairAtDenialLua string

var repairAtDenial = store.NewScript(repairAtDenialLua)

// RepairAtDenial is a first-request fixed window, one limit, that gives a
// counter stripped of its TTL its TTL back only when it denies, while its
// keys are not named by window: it claims what only keys named by their
// window may claim (Spec.RepairsAtDenial), and a stripped counter that is
// never denied holds its subject past its window.
type RepairAtDenial struct{}

// Decide implements limiter.Strategy, wrongly.
func (RepairAtDenial) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	if len(req.Limits) != 1 || req.Cost == 0 || req.DryRun {
		return strategy.NewFixedWindow().Decide(ctx, st, req)
	}
	l := req.Limits[0]
	v, err := repairAtDenial.Run(ctx, st, req.Keys, []any{req.Cost, l.Rate, l.Period.Milliseconds()})
	if err != nil {
		return limiter.Result{}, err
	}
	nums, err := store.Int64s(v)
	if err != nil || len(nums) != 2 {
		return limiter.Result{}, fmt.Errorf("knownbad: reply %v: %w", v, err)
	}
	var b limiter.Binder
	reset := time.Duration(max(nums[1], 1)) * time.Millisecond
	if nums[0] > l.Rate {
		b.Add(0, l.Rate-(nums[0]-req.Cost), reset, reset)
		return b.Result(false), nil
	}
	b.Add(0, l.Rate-nums[0], reset, 0)
	return b.Result(true), nil
}

// RuleByRule is one script per rule, each consuming,
// stopping at the first rule that rejects.
type RuleByRule struct{}

// Decide implements limiter.Strategy, wrongly.
func (RuleByRule) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	var b limiter.Binder
	for i, l := range req.Limits {
		if req.Cost == 0 || req.DryRun {
			rs, err := st.Do(ctx, store.Cmd{Name: "GET", Args: []any{req.Keys[i]}})
			if err != nil {
				return limiter.Result{}, err
			}
			n, _ := store.Int64(rs[0].Val)
			retry := time.Duration(0)
			if n+req.Cost > l.Rate {
				retry = l.Period
			}
			b.Add(i, l.Rate-n, l.Period, retry)
			continue
		}
		v, err := ruleByRuleScript.Run(ctx, st, []string{req.Keys[i]}, []any{int64(l.Period / time.Second), l.Rate, req.Cost})
		if err != nil {
			return limiter.Result{}, err
		}
		nums, err := store.Int64s(v)
		if err != nil || len(nums) != 2 {
			return limiter.Result{}, fmt.Errorf("knownbad: reply %v: %w", v, err)
		}
		if nums[0] > l.Rate {
			retry := time.Duration(nums[1]) * time.Millisecond
			if req.Cost > l.Rate {
				retry = -1
			}
			b.Add(i, l.Rate-nums[0], time.Duration(nums[1])*time.Millisecond, retry)
			return b.Result(false), nil
		}
		b.Add(i, l.Rate-nums[0], time.Duration(nums[1])*time.Millisecond, 0)
	}
	return b.Result(true), nil
}

// UntaggedKeys is a correct fixed window whose keys lose their hash tag, as
// hand-written "LIMIT:RATE:" + phone keys have none: the keys of one decision
// land in different Cluster slots, and a multi-key script fails CROSSSLOT.
type UntaggedKeys struct {
	Strategy limiter.Strategy
}

var untag = strings.NewReplacer("{", "", "}", "")

// Decide implements limiter.Strategy, wrongly.
func (u UntaggedKeys) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	keys := make([]string, len(req.Keys))
	for i, k := range req.Keys {
		keys[i] = untag.Replace(k)
	}
	req.Keys = keys
	return u.Strategy.Decide(ctx, st, req)
}

// SubjectlessKeys is a correct fixed window whose keys name the limit
// alone, not the subject, as a hand-written "ratelimit:" + rule key does
// when the user's ID was meant to be appended: every subject counts in one
// counter, and the first subjects of a window deny all the others.
type SubjectlessKeys struct {
	Strategy limiter.Strategy
}

// Decide implements limiter.Strategy, wrongly.
func (s SubjectlessKeys) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	keys := make([]string, len(req.Keys))
	for i, k := range req.Keys {
		// prefix:{subject}:limit becomes prefix:{all}:limit (a hash
		// tag still: the keys of one decision stay in one slot)
		open, end := strings.IndexByte(k, '{'), strings.LastIndexByte(k, '}')
		keys[i] = k
		if open >= 0 && end > open {
			keys[i] = k[:open] + "{all}" + k[end+1:]
		}
	}
	req.Keys = keys
	return s.Strategy.Decide(ctx, st, req)
}

// InlinedLimits is FixedWindow with the limits written into the script's
// source (here a comment; in the wild a template filled with the rate and
// window): every distinct limit is a new script, so its first call sends
// the whole source with EVAL, and the server's script cache grows with the
// number of distinct limits, never shrinking. Its decisions are right.
type InlinedLimits struct {
	// Tag, when not empty, is written into every script's source too: runs
	// with different tags make different scripts, so that a run on a
	// server that keeps its script cache from an earlier run still sends
	// its sources.
	Tag string
}

// Decide implements limiter.Strategy, wastefully.
func (s InlinedLimits) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	var src strings.Builder
	if s.Tag != "" {
		fmt.Fprintf(&src, "-- run %s\n", s.Tag)
	}
	args := []int64{req.Cost, 0}
	if req.DryRun {
		args[1] = 1
	}
	for _, l := range req.Limits {
		fmt.Fprintf(&src, "-- limit %d per %d ms\n", l.Rate, l.Period.Milliseconds())
		args = append(args, l.Rate, l.Period.Milliseconds())
	}
	src.WriteString(strategy.FixedWindowScript().Source())
	boxed := make([]any, len(args))
	for i, a := range args {
		boxed[i] = a
	}
	v, err := store.NewScript(src.String()).Run(ctx, st, req.Keys, boxed)
	// The reply is FixedWindow's: read it as FixedWindow does.
	return strategy.NewFixedWindow().BatchResult(req, store.Reply{Val: v, Err: err})
}

//go:embed lua/gcra_app_clock.lua
var gcraAppClockLua string

var gcraAppClock = store.NewScript(gcraAppClockLua)

// AppClockGCRA is GCRA on the app server's clock: the caller passes "now"
// to the script, one limit at a time.
type AppClockGCRA struct {
	// Now is the app clock; nil means time.Now.
	Now func() time.Time
}

// Decide implements limiter.Strategy, wrongly.
func (s AppClockGCRA) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	now := appClock(s.Now)
	return oneLimitAtATime(ctx, st, req, gcraAppClock, func(l limiter.Limit, cost int64) []any {
		return []any{now().UnixMilli(), max(l.Period.Milliseconds()/l.Rate, 1), burstOf(l), cost}
	})
}

// oneLimitAtATime runs script once per limit, each deciding and consuming
// on its own (the mistake of rule-by-rule designs), with args(limit, cost)
// as ARGV (cost 0 for a peek); each reply is {allowed, remaining,
// reset_ms, retry_ms}.
func oneLimitAtATime(ctx context.Context, st store.Store, req limiter.Request, script *store.Script, args func(l limiter.Limit, cost int64) []any) (limiter.Result, error) {
	var b limiter.Binder
	allowed := true
	for i, l := range req.Limits {
		cost := req.Cost
		if req.DryRun {
			cost = 0
		}
		v, err := script.Run(ctx, st, []string{req.Keys[i]}, args(l, cost))
		if err != nil {
			return limiter.Result{}, err
		}
		nums, err := store.Int64s(v)
		if err != nil || len(nums) != 4 {
			return limiter.Result{}, fmt.Errorf("knownbad: reply %v: %w", v, err)
		}
		allowed = allowed && nums[0] == 1
		retry := time.Duration(nums[3]) * time.Millisecond
		if nums[3] < 0 {
			retry = -1
		}
		b.Add(i, nums[1], time.Duration(nums[2])*time.Millisecond, retry)
	}
	return b.Result(allowed), nil
}

//go:embed lua/sliding_log_stamp.lua
var stampLogLua string

var stampLog = store.NewScript(stampLogLua)

// StampLog is a sliding log whose member is the request's timestamp, one
// limit at a time: same-instant units collapse into one member.
type StampLog struct{}

// Decide implements limiter.Strategy, wrongly.
func (StampLog) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	return oneLimitAtATime(ctx, st, req, stampLog, func(l limiter.Limit, cost int64) []any {
		return []any{l.Rate, l.Period.Milliseconds(), cost}
	})
}

// BatchOneCost is FixedWindow whose batched calls (Limiter.AllowMany) send
// a cost of 1 whatever each request asks for: batching code that builds one
// argument list for all the requests of a batch. Its single calls are
// right.
type BatchOneCost struct{ strategy.FixedWindow }

// BatchesItself tells AllowMany to batch BatchOneCost's own calls (a type
// that embeds FixedWindow is otherwise decided ask by ask, with its Decide).
func (s BatchOneCost) BatchesItself(derive.Token) any { return s }

// BatchScript implements limiter.ScriptStrategy, wrongly.
func (s BatchOneCost) BatchScript(req limiter.Request) (*store.Script, []any, error) {
	req.Cost = 1
	return s.FixedWindow.BatchScript(req)
}

//go:embed lua/many_stops_at_error.lua
var manyStopsLua string

var manyStops = store.NewScript(manyStopsLua)

// ManyStopsAtError is FixedWindow whose many-request script
// (limiter.ManyScriptStrategy, which Limiter.AllowMany sends on one
// server) runs its requests in one loop with nothing around each: the
// first error (a counter of another type) ends the call, and every ask of
// the batch gets it. Its single calls are right.
type ManyStopsAtError struct{ strategy.FixedWindow }

// BatchesItself tells AllowMany to batch ManyStopsAtError's own calls.
func (s ManyStopsAtError) BatchesItself(derive.Token) any { return s }

// ManyScript implements limiter.ManyScriptStrategy, wrongly.
func (ManyStopsAtError) ManyScript(*store.Script) *store.Script { return manyStops }

//go:embed lua/float_token_bucket.lua
var floatBucketLua string

var floatBucket = store.NewScript(floatBucketLua)

// FloatTokenBucket is a token bucket kept in floating point that refills
// by adding fractions of a token on every call: the sums drift.
type FloatTokenBucket struct{}

// Decide implements limiter.Strategy, wrongly.
func (FloatTokenBucket) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	return oneLimitAtATime(ctx, st, req, floatBucket, func(l limiter.Limit, cost int64) []any {
		return []any{l.Rate, l.Period.Milliseconds(), burstOf(l), cost}
	})
}

// WholeMsTokenBucket is a token bucket that counts a token's interval
// Period/Rate in whole milliseconds, rounded down as integer division
// does: 3 per second refills a token every 333 ms (3 in 999 ms), so each
// unit comes back early. Limits of whole-millisecond intervals are
// decided right.
type WholeMsTokenBucket struct{}

// Decide implements limiter.Strategy, wrongly.
func (WholeMsTokenBucket) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	ls := make([]limiter.Limit, len(req.Limits))
	for i, l := range req.Limits {
		if ms := l.Period.Milliseconds() / l.Rate; ms > 0 {
			l.Period = time.Duration(ms*l.Rate) * time.Millisecond
		}
		ls[i] = l
	}
	req.Limits = ls
	return strategy.NewTokenBucket().Decide(ctx, st, req)
}

// burstOf is the most l admits at once: its Burst, or its Rate when 0.
func burstOf(l limiter.Limit) int64 {
	if l.Burst > 0 {
		return l.Burst
	}
	return l.Rate
}

//go:embed lua/rate_countdown.lua
var rateCountdownLua string

var rateCountdown = store.NewScript(rateCountdownLua)

// RateCountdown is a fixed window whose counter counts down from the rate
// it was created with (it holds rate − count), one limit per call: when a
// rule's rate changes and its name and period stay, the counter is read
// against the new rate, so a lowered rate admits what the old one had
// left and a raised one denies what the new one allows.
type RateCountdown struct{}

// Decide implements limiter.Strategy, wrongly.
func (RateCountdown) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	if len(req.Limits) != 1 {
		return strategy.NewFixedWindow().Decide(ctx, st, req)
	}
	l := req.Limits[0]
	var b limiter.Binder
	if req.Cost == 0 || req.DryRun || req.Cost > l.Rate {
		rs, err := st.Do(ctx, store.Cmd{Name: "GET", Args: []any{req.Keys[0]}})
		if err != nil {
			return limiter.Result{}, err
		}
		left := l.Rate
		if n, err := store.Int64(rs[0].Val); err == nil {
			left = n
		}
		retry := time.Duration(0)
		switch {
		case req.Cost > l.Rate:
			retry = -1
		case req.Cost > left:
			retry = l.Period
		}
		b.Add(0, left, l.Period, retry)
		return b.Result(retry == 0), nil
	}
	v, err := rateCountdown.Run(ctx, st, req.Keys, []any{req.Cost, l.Rate, l.Period.Milliseconds()})
	if err != nil {
		return limiter.Result{}, err
	}
	nums, err := store.Int64s(v)
	if err != nil || len(nums) != 2 {
		return limiter.Result{}, fmt.Errorf("knownbad: reply %v: %w", v, err)
	}
	reset := time.Duration(max(nums[1], 1)) * time.Millisecond
	if nums[0] < 0 {
		b.Add(0, nums[0]+req.Cost, reset, reset)
		return b.Result(false), nil
	}
	b.Add(0, nums[0], reset, 0)
	return b.Result(true), nil
}

// StrictState is a correct strategy behind a sanity check on the state it
// reads: a counter above its limit's rate "cannot happen", so it is
// refused as corrupt. It can: a rules change lowers a rate while the
// window holds more than the new one, and every call of that subject then
// fails until the window ends (under FailOpen, every one is admitted).
type StrictState struct {
	Strategy limiter.Strategy // the correct strategy wrapped
}

// Decide implements limiter.Strategy, wrongly.
func (s StrictState) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	for i, l := range req.Limits {
		rs, err := st.Do(ctx, store.Cmd{Name: "GET", Args: []any{req.Keys[i]}})
		if err != nil {
			return limiter.Result{}, err
		}
		if n, err := store.Int64(rs[0].Val); rs[0].Err == nil && err == nil && n > l.Rate {
			return limiter.Result{}, fmt.Errorf("%w: count %d above the rate of %s", limiter.ErrCorruptCounter, n, l)
		}
	}
	return s.Strategy.Decide(ctx, st, req)
}

// PeekAsRepaired is a correct window strategy whose peeks report a window
// longer than its limit's Period (a rules change shortened the period) as
// one Period long, the window the next writing call will repair it to.
// No call writes that repair for a peek: the window keeps its old expiry,
// and a caller who waits out the peek's RetryAfter is denied again.
type PeekAsRepaired struct {
	Strategy limiter.Strategy // the correct strategy wrapped
}

// Decide implements limiter.Strategy, wrongly.
func (s PeekAsRepaired) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	r, err := s.Strategy.Decide(ctx, st, req)
	if err != nil || !req.DryRun {
		return r, err
	}
	p := req.Limits[r.Index].Period
	r.RetryAfter = min(r.RetryAfter, p)
	r.ResetAfter = min(r.ResetAfter, p)
	return r, nil
}

// LongestWindow is a correct strategy whose several limits of one call
// all get the call's longest period, as a multi-rule counter does that
// sets one expiry for all its keys: a limit of 1 per second checked with
// 100 per hour is held for an hour. Its Results name the limits asked for.
type LongestWindow struct {
	Strategy limiter.Strategy // the correct strategy wrapped
}

// Decide implements limiter.Strategy, wrongly.
func (s LongestWindow) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	asked := req.Limits
	var longest time.Duration
	for _, l := range asked {
		longest = max(longest, l.Period)
	}
	ls := make([]limiter.Limit, len(asked))
	for i, l := range asked {
		l.Period = longest
		ls[i] = l
	}
	req.Limits = ls
	r, err := s.Strategy.Decide(ctx, st, req)
	if err == nil && r.Index >= 0 && r.Index < len(asked) {
		r.Limit = asked[r.Index]
	}
	return r, err
}

// KeepsSubjects is a correct strategy that keeps, in the app's memory, a
// log of the last 4096 decisions of every subject it has seen (a local
// audit trail, or a per-user cache) and never evicts it: the process's
// memory grows with the number of distinct subjects, without bound.
type KeepsSubjects struct {
	Strategy limiter.Strategy // the correct strategy wrapped

	mu   sync.Mutex
	logs map[string]*[4096]int64
}

// Decide implements limiter.Strategy, wastefully.
func (s *KeepsSubjects) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	r, err := s.Strategy.Decide(ctx, st, req)
	if err == nil && len(req.Keys) > 0 {
		s.mu.Lock()
		if s.logs == nil {
			s.logs = map[string]*[4096]int64{}
		}
		log := s.logs[req.Keys[0]]
		if log == nil {
			log = new([4096]int64)
			s.logs[req.Keys[0]] = log
		}
		copy(log[1:], log[:])
		log[0] = time.Now().UnixNano()
		s.mu.Unlock()
	}
	return r, err
}

//go:embed lua/gcra_blind_expiry.lua
var gcraBlindExpiryLua string

var gcraBlindExpiry = store.NewScript(gcraBlindExpiryLua)

// BlindExpiryGCRA is GCRA whose state is the key's expiry, as
// strategy.GCRA keeps a limit of whole milliseconds, but whose call for
// one such limit writes without looking at what the key held: a key
// holding another program's value is overwritten, not reported. Calls with
// several limits, or of other intervals, are strategy.GCRA's.
type BlindExpiryGCRA struct{}

// Decide implements limiter.Strategy, wrongly.
func (BlindExpiryGCRA) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	if len(req.Limits) != 1 || req.Limits[0].Period%(time.Duration(req.Limits[0].Rate)*time.Millisecond) != 0 {
		return strategy.NewGCRA().Decide(ctx, st, req)
	}
	return oneLimitAtATime(ctx, st, req, gcraBlindExpiry, func(l limiter.Limit, cost int64) []any {
		return []any{l.Period.Milliseconds() / l.Rate, burstOf(l), cost}
	})
}

// SlidingExpiry is a sliding window counter that sets its keys' expiry two
// Periods ahead after every admitted call, in a second round trip ("EXPIRE
// on every call"): its state's clock is that expiry, so every admission
// starts its window again, and a subject asked steadily never sees its
// previous window's count weigh less.
type SlidingExpiry struct{}

// Decide implements limiter.Strategy, wrongly.
func (SlidingExpiry) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	r, err := strategy.NewSlidingWindow().Decide(ctx, st, req)
	if err != nil || !r.Allowed || req.DryRun || req.Cost == 0 {
		return r, err
	}
	cmds := make([]store.Cmd, len(req.Keys))
	for i, k := range req.Keys {
		cmds[i] = store.Cmd{Name: "PEXPIRE", Args: []any{k, 2 * req.Limits[i].Period.Milliseconds()}}
	}
	if _, err := st.Do(ctx, cmds...); err != nil {
		return limiter.Result{}, err
	}
	return r, nil
}

// FullPeriodReset is a fixed window that leases its quota
// (limiter.WindowQuota) and reports every admitted decision's ResetAfter as
// its limit's whole period, as a hand-written limiter that sends its window
// length for X-RateLimit-Reset does: a quota lease then lives past the
// window its units were counted in and admits them in the next one.
type FullPeriodReset struct {
	Strategy limiter.Strategy // the correct strategy wrapped
}

// Decide implements limiter.Strategy, wrongly.
func (s FullPeriodReset) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	r, err := s.Strategy.Decide(ctx, st, req)
	if err == nil && r.Allowed && r.Index >= 0 && r.Index < len(req.Limits) {
		r.ResetAfter = req.Limits[r.Index].Period
	}
	return r, err
}

// WindowQuota implements limiter.WindowQuota, wrongly.
func (FullPeriodReset) WindowQuota() {}

//go:embed lua/take_back_after_expiry.lua
var takeBackAfterExpiryLua string

var takeBackAfterExpiry = store.NewScript(takeBackAfterExpiryLua)

// TakeBackAfterExpiry is a fixed window that counts first, gives the
// counter its expiry when it has none (or one beyond its window), and then
// takes a denial's cost back: after the expiry, on a key the server may
// have deleted at it.
type TakeBackAfterExpiry struct{}

// Decide implements limiter.Strategy, wrongly.
func (TakeBackAfterExpiry) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	return oneLimitAtATime(ctx, st, req, takeBackAfterExpiry, func(l limiter.Limit, cost int64) []any {
		return []any{l.Rate, l.Period.Milliseconds(), cost}
	})
}

// ResetPrimaryKey is FixedWindow with a hand-written Reset that deletes the
// key of the subject's first limit alone: a Reset written when the subject
// had one limit, kept when others were added. They keep their counts, and a
// subject reset under several limits is still denied.
type ResetPrimaryKey struct{ strategy.FixedWindow }

// Reset implements limiter.Resetter, wrongly.
func (ResetPrimaryKey) Reset(ctx context.Context, st store.Store, keys []string) error {
	_, err := st.Do(ctx, store.Cmd{Name: "DEL", Args: []any{keys[0]}})
	return err
}

// ResetEveryone is FixedWindow with a hand-written Reset that deletes its
// limits' keys by pattern, the subject's part of each key matched by "*"
// (as a Reset written for an admin's "clear this limit" and then given
// one subject): every subject's counts under those limits are gone, and
// every subject gets a whole new quota at once.
type ResetEveryone struct{ strategy.FixedWindow }

// Reset implements limiter.Resetter, wrongly.
func (ResetEveryone) Reset(ctx context.Context, st store.Store, keys []string) error {
	for _, k := range keys {
		i, j := strings.IndexByte(k, '{'), strings.IndexByte(k, '}')
		if i < 0 || j < i {
			continue
		}
		pattern := k[:i+1] + "*" + k[j:]
		for cursor := "0"; ; {
			rs, err := st.Do(ctx, store.Cmd{Name: "SCAN", Args: []any{cursor, "MATCH", pattern, "COUNT", 1000}})
			if err == nil {
				err = rs[0].Err
			}
			if err != nil {
				return err
			}
			page, err := store.Slice(rs[0].Val)
			if err != nil || len(page) != 2 {
				return fmt.Errorf("knownbad: SCAN reply %v", rs[0].Val)
			}
			found, _ := store.Slice(page[1])
			for _, f := range found {
				if _, err := st.Do(ctx, store.Cmd{Name: "DEL", Args: []any{f}}); err != nil {
					return err
				}
			}
			if cursor, _ = page[0].(string); cursor == "0" || cursor == "" {
				break
			}
		}
	}
	return nil
}

//go:embed lua/expire_then_read.lua
var expireThenReadLua string

var expireThenRead = store.NewScript(expireThenReadLua)

// ExpireThenRead is a fixed window that counts, gives the counter its
// expiry when it has none (or one beyond its window), and then reads the
// counter back for the reply's Remaining: after the expiry, on a key the
// server may have deleted at it. A user sees rare errors from Allow (and
// the fail mode's decision) on short windows and on keys whose TTL was
// repaired, for admissions the script had already counted.
type ExpireThenRead struct{}

// Decide implements limiter.Strategy, wrongly.
func (ExpireThenRead) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	return oneLimitAtATime(ctx, st, req, expireThenRead, func(l limiter.Limit, cost int64) []any {
		return []any{l.Rate, l.Period.Milliseconds(), cost}
	})
}

// EdgeNeverFits is FixedWindow whose denial in a window's last millisecond
// (at most 1 ms left to wait) says RetryAfter -1, "the cost never fits",
// as a script that reads a PTTL of 0 like PTTL's codes -1 and -2 does: a
// caller that trusts -1 (Wait among them) gives up on a request that fits
// a millisecond later.
type EdgeNeverFits struct {
	Strategy limiter.Strategy // the correct strategy wrapped
}

// Decide implements limiter.Strategy, wrongly.
func (s EdgeNeverFits) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	r, err := s.Strategy.Decide(ctx, st, req)
	if err == nil && !r.Allowed && r.RetryAfter > 0 && r.RetryAfter <= time.Millisecond {
		r.RetryAfter = -1
	}
	return r, err
}

//go:embed lua/rate_cap_bucket.lua
var rateCapBucketLua string

var rateCapBucket = store.NewScript(rateCapBucketLua)

// RateCapBucket is a token bucket as often written by hand (its tokens and
// the time of its last refill), exact in integers, whose capacity is taken
// to be the limit's Rate instead of its Burst: a refill is capped at Rate
// tokens, and its key lives until the bucket holds them; only a new bucket
// holds its Burst. 10 per second with a burst of 3, emptied, admits 5 in a
// row half a second later. A limit whose Burst is its Rate is decided
// right.
type RateCapBucket struct{}

// Decide implements limiter.Strategy, wrongly.
func (RateCapBucket) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	args := []any{req.Cost, 0}
	if req.DryRun {
		args[1] = 1
	}
	for _, l := range req.Limits {
		args = append(args, l.Rate, l.Period.Milliseconds(), burstOf(l))
	}
	v, err := rateCapBucket.Run(ctx, st, req.Keys, args)
	if err != nil {
		if strings.Contains(err.Error(), "WRONGTYPE") || strings.Contains(err.Error(), "limiter corrupt counter") {
			return limiter.Result{}, fmt.Errorf("%w: %w", limiter.ErrCorruptCounter, err)
		}
		return limiter.Result{}, err
	}
	nums, err := store.Int64s(v)
	if err != nil || len(nums) != 1+3*len(req.Limits) {
		return limiter.Result{}, fmt.Errorf("knownbad: reply %v: %w", v, err)
	}
	var b limiter.Binder
	for i := range req.Limits {
		retry := time.Duration(nums[3+3*i]) * time.Millisecond
		if nums[3+3*i] < 0 {
			retry = -1
		}
		b.Add(i, nums[1+3*i], time.Duration(nums[2+3*i])*time.Millisecond, retry)
	}
	return b.Result(nums[0] == 1), nil
}
