package knownbad

import (
	"fmt"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/derive"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// The batch readers: FixedWindow whose batched calls (Limiter.AllowMany,
// which sends them in one pipeline or one many-request script call) are
// read by a reader written apart from its single calls' (which are right),
// with one mistake each. Each declares BatchesItself, so that AllowMany
// batches its calls (a type that embeds FixedWindow is otherwise decided
// ask by ask, with its Decide).

// countReply reads FixedWindow's reply to a call of one limit that writes
// a cost the rate can fit: the count after the call (above the rate:
// denied, and already taken back by the script) and the window's reset in
// milliseconds, sent as one integer reset·(2·rate+1) + count, or as
// {count, reset}. ok is false for any other call or reply.
func countReply(req limiter.Request, r store.Reply) (count, reset int64, ok bool) {
	if r.Err != nil || len(req.Limits) != 1 || req.DryRun || req.Cost <= 0 || req.Cost > req.Limits[0].Rate {
		return 0, 0, false
	}
	nums, err := store.AppendInt64s(nil, r.Val)
	switch {
	case err != nil:
		return 0, 0, false
	case len(nums) == 1:
		m := 2*req.Limits[0].Rate + 1
		return nums[0] % m, nums[0] / m, nums[0] >= 0
	case len(nums) == 2:
		return nums[0], nums[1], true
	}
	return 0, 0, false
}

// BatchRawErrors is FixedWindow whose batched calls' reader returns a
// script's error reply as it came: a counter of another type (WRONGTYPE)
// is a plain error, not limiter.ErrCorruptCounter, as a reader that never
// classifies errors returns it. Its single calls are right.
type BatchRawErrors struct{ strategy.FixedWindow }

// BatchesItself tells AllowMany to batch BatchRawErrors's own calls.
func (s BatchRawErrors) BatchesItself(derive.Token) any { return s }

// BatchResult implements limiter.ScriptStrategy, wrongly.
func (s BatchRawErrors) BatchResult(req limiter.Request, r store.Reply) (limiter.Result, error) {
	if r.Err != nil {
		return limiter.Result{}, r.Err
	}
	return s.FixedWindow.BatchResult(req, r)
}

// BatchDenialIsBadReply is FixedWindow whose batched calls' reader takes a
// reply whose count is above the rate for a malformed one: the script
// reports a denied call's count before taking it back, and every denial of
// a batch is an error. Its single calls are right.
type BatchDenialIsBadReply struct{ strategy.FixedWindow }

// BatchesItself tells AllowMany to batch BatchDenialIsBadReply's own calls.
func (s BatchDenialIsBadReply) BatchesItself(derive.Token) any { return s }

// BatchResult implements limiter.ScriptStrategy, wrongly.
func (s BatchDenialIsBadReply) BatchResult(req limiter.Request, r store.Reply) (limiter.Result, error) {
	if count, _, ok := countReply(req, r); ok && count > req.Limits[0].Rate {
		return limiter.Result{}, fmt.Errorf("knownbad: bad reply: count %d above rate %d", count, req.Limits[0].Rate)
	}
	return s.FixedWindow.BatchResult(req, r)
}

// BatchNoRetryAfter is FixedWindow whose batched calls' reader fills a
// decision's Allowed, Remaining and ResetAfter from the reply and leaves
// RetryAfter 0: a denial does not say when to come back. Its single calls
// are right.
type BatchNoRetryAfter struct{ strategy.FixedWindow }

// BatchesItself tells AllowMany to batch BatchNoRetryAfter's own calls.
func (s BatchNoRetryAfter) BatchesItself(derive.Token) any { return s }

// BatchResult implements limiter.ScriptStrategy, wrongly.
func (s BatchNoRetryAfter) BatchResult(req limiter.Request, r store.Reply) (limiter.Result, error) {
	res, err := s.FixedWindow.BatchResult(req, r)
	res.RetryAfter = 0
	return res, err
}

// BatchNoResetAfter is FixedWindow whose batched calls' reader fills a
// decision's Allowed, Remaining and RetryAfter from the reply and leaves
// ResetAfter 0: an admission does not say when its window ends. Its single
// calls are right.
type BatchNoResetAfter struct{ strategy.FixedWindow }

// BatchesItself tells AllowMany to batch BatchNoResetAfter's own calls.
func (s BatchNoResetAfter) BatchesItself(derive.Token) any { return s }

// BatchResult implements limiter.ScriptStrategy, wrongly.
func (s BatchNoResetAfter) BatchResult(req limiter.Request, r store.Reply) (limiter.Result, error) {
	res, err := s.FixedWindow.BatchResult(req, r)
	res.ResetAfter = 0
	return res, err
}

// BatchResetInSeconds is FixedWindow whose batched calls' reader takes the
// reply's milliseconds (the window's reset, and so a denial's RetryAfter)
// for seconds: an hour's window is told to end in 1000 hours. Its single
// calls are right.
type BatchResetInSeconds struct{ strategy.FixedWindow }

// BatchesItself tells AllowMany to batch BatchResetInSeconds's own calls.
func (s BatchResetInSeconds) BatchesItself(derive.Token) any { return s }

// BatchResult implements limiter.ScriptStrategy, wrongly.
func (s BatchResetInSeconds) BatchResult(req limiter.Request, r store.Reply) (limiter.Result, error) {
	res, err := s.FixedWindow.BatchResult(req, r)
	res.ResetAfter = res.ResetAfter / time.Millisecond * time.Second
	res.RetryAfter = res.RetryAfter / time.Millisecond * time.Second
	return res, err
}

// BatchAdmitsPastRate is FixedWindow whose batched calls' reader admits a
// call when the count before it (the reply's count less the cost) is
// within the rate, not the count after it: the call that goes past the
// rate is told it is admitted though the script took it back, and so is
// every call after it in the window (each finds the same count). Its
// single calls are right.
type BatchAdmitsPastRate struct{ strategy.FixedWindow }

// BatchesItself tells AllowMany to batch BatchAdmitsPastRate's own calls.
func (s BatchAdmitsPastRate) BatchesItself(derive.Token) any { return s }

// BatchResult implements limiter.ScriptStrategy, wrongly.
func (s BatchAdmitsPastRate) BatchResult(req limiter.Request, r store.Reply) (limiter.Result, error) {
	count, reset, ok := countReply(req, r)
	if !ok || count <= req.Limits[0].Rate || count-req.Cost > req.Limits[0].Rate {
		return s.FixedWindow.BatchResult(req, r)
	}
	var b limiter.Binder
	b.Add(0, req.Limits[0].Rate-count, time.Duration(reset)*time.Millisecond, 0)
	return b.Result(true), nil
}

// BatchDeniesLastUnit is FixedWindow whose batched calls' reader admits a
// call only when the count after it is below the rate (count < rate, an
// off-by-one): the call that takes a window's last unit is told it is
// denied, though the script counted it. Its single calls are right.
type BatchDeniesLastUnit struct{ strategy.FixedWindow }

// BatchesItself tells AllowMany to batch BatchDeniesLastUnit's own calls.
func (s BatchDeniesLastUnit) BatchesItself(derive.Token) any { return s }

// BatchResult implements limiter.ScriptStrategy, wrongly.
func (s BatchDeniesLastUnit) BatchResult(req limiter.Request, r store.Reply) (limiter.Result, error) {
	count, reset, ok := countReply(req, r)
	if !ok || count != req.Limits[0].Rate {
		return s.FixedWindow.BatchResult(req, r)
	}
	var b limiter.Binder
	after := time.Duration(reset) * time.Millisecond
	b.Add(0, req.Cost, after, after)
	return b.Result(false), nil
}
