package knownbad

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/quotagate/limiter/store"
)

// NoScriptFallback wraps st so that EVAL runs only once (the first load):
// after that a NOSCRIPT reply is returned to the caller.
func NoScriptFallback(st store.Store) store.Store { return &noFallback{Store: st} }

type noFallback struct {
	store.Store
	loaded atomic.Bool
}

func (s *noFallback) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	if s.loaded.Swap(true) {
		return nil, errors.New("knownbad: NOSCRIPT and no fallback")
	}
	return s.Store.Eval(ctx, src, keys, args)
}

// Retrying wraps st so that a call whose reply was lost is sent again, as
// client libraries do by default.
func Retrying(st store.Store) store.Store { return retrying{st} }

type retrying struct{ store.Store }

func (s retrying) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	rs, err := s.Store.Do(ctx, cmds...)
	if errors.Is(err, store.ErrUnknownOutcome) {
		return s.Store.Do(ctx, cmds...)
	}
	return rs, err
}

func (s retrying) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	v, err := s.Store.EvalSha(ctx, sha, keys, args)
	if errors.Is(err, store.ErrUnknownOutcome) {
		return s.Store.EvalSha(ctx, sha, keys, args)
	}
	return v, err
}

// Unmapped wraps st so that errors lose their store sentinels, as an
// adapter that passes its client's errors through would.
func Unmapped(st store.Store) store.Store { return unmapped{st} }

type unmapped struct{ store.Store }

func strip(err error) error {
	if err == nil {
		return nil
	}
	return errors.New(err.Error())
}

func (s unmapped) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	rs, err := s.Store.Do(ctx, cmds...)
	for i := range rs {
		rs[i].Err = strip(rs[i].Err)
	}
	return rs, strip(err)
}

func (s unmapped) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	v, err := s.Store.EvalSha(ctx, sha, keys, args)
	return v, strip(err)
}

func (s unmapped) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	v, err := s.Store.Eval(ctx, src, keys, args)
	return v, strip(err)
}

// UnmappedEval wraps st so that a lost reply to a script sent by EvalSha
// or Eval (the path of scripts whose reply is not integers alone: lease
// scripts among them) is a plain error, without store.ErrUnknownOutcome,
// while the integer-script path keeps it: a store that maps its client's
// errors in one path and not in another.
func UnmappedEval(st store.Store) store.Store { return unmappedEval{st} }

type unmappedEval struct{ store.Store }

func (s unmappedEval) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	v, err := s.Store.EvalSha(ctx, sha, keys, args)
	return v, stripUnknown(err)
}

func (s unmappedEval) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	v, err := s.Store.Eval(ctx, src, keys, args)
	return v, stripUnknown(err)
}

// stripUnknown is strip for an error that wraps store.ErrUnknownOutcome.
func stripUnknown(err error) error {
	if errors.Is(err, store.ErrUnknownOutcome) {
		return strip(err)
	}
	return err
}

// IgnoresDeadline wraps st so that calls ignore the context's deadline, as a
// client with context timeouts disabled does: a slow or blackholed Redis
// holds every call for the client's own read timeout.
func IgnoresDeadline(st store.Store) store.Store { return ignoresDeadline{st} }

type ignoresDeadline struct{ store.Store }

func (s ignoresDeadline) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	return s.Store.Do(context.WithoutCancel(ctx), cmds...)
}

func (s ignoresDeadline) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	return s.Store.EvalSha(context.WithoutCancel(ctx), sha, keys, args)
}

func (s ignoresDeadline) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	return s.Store.Eval(context.WithoutCancel(ctx), src, keys, args)
}

// LaxInts wraps st with an integer-script path that reads every reply
// element that is not an integer as 0, as a client's "as int slice" helper
// does: a nil or a text element becomes a made-up count.
func LaxInts(st store.Store) store.Store { return laxInts{st} }

type laxInts struct{ store.Store }

func (s laxInts) EvalShaInt64s(ctx context.Context, sha string, keys []string, args []int64, dst []int64) ([]int64, error) {
	return laxInt64s(s.Store.EvalSha(ctx, sha, keys, boxInts(args)))(dst)
}

func (s laxInts) EvalInt64s(ctx context.Context, src string, keys []string, args []int64, dst []int64) ([]int64, error) {
	return laxInt64s(s.Store.Eval(ctx, src, keys, boxInts(args)))(dst)
}

// ArrayInts wraps st with an integer-script path that accepts only array
// replies, refusing a script's bare integer reply (the common path of
// AlignedWindow returns its count alone).
func ArrayInts(st store.Store) store.Store { return arrayInts{st} }

type arrayInts struct{ store.Store }

func (s arrayInts) EvalShaInt64s(ctx context.Context, sha string, keys []string, args []int64, dst []int64) ([]int64, error) {
	return arrayInt64s(s.Store.EvalSha(ctx, sha, keys, boxInts(args)))(dst)
}

func (s arrayInts) EvalInt64s(ctx context.Context, src string, keys []string, args []int64, dst []int64) ([]int64, error) {
	return arrayInt64s(s.Store.Eval(ctx, src, keys, boxInts(args)))(dst)
}

func arrayInt64s(v any, err error) func(dst []int64) ([]int64, error) {
	return func(dst []int64) ([]int64, error) {
		if err != nil {
			return nil, err
		}
		if _, ok := v.([]any); !ok {
			return nil, fmt.Errorf("knownbad: reply %v is not an array", v)
		}
		return store.AppendInt64s(dst, v)
	}
}

func boxInts(args []int64) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a
	}
	return out
}

func laxInt64s(v any, err error) func(dst []int64) ([]int64, error) {
	return func(dst []int64) ([]int64, error) {
		if err != nil {
			return nil, err
		}
		arr, _ := v.([]any)
		for _, e := range arr {
			n, _ := e.(int64)
			dst = append(dst, n)
		}
		return dst, nil
	}
}

// FirstErrorFailsBatch is a store whose Batch sends the commands in one
// pipeline and, as hand-written code around a client's pipeline Exec often
// does (go-redis's returns the first command's error), takes any command's
// error for the whole batch's: every command gets it, though the others
// ran and got their replies.
func FirstErrorFailsBatch(st store.Store) store.Store { return firstErrorFails{st} }

type firstErrorFails struct{ store.Store }

func (s firstErrorFails) Batch(ctx context.Context, cmds []store.Cmd) []store.Reply {
	rs, err := s.Do(ctx, cmds...)
	if err == nil {
		for _, r := range rs {
			if r.Err != nil {
				err = r.Err
				break
			}
		}
	}
	if err != nil {
		rs = make([]store.Reply, len(cmds))
		for i := range rs {
			rs[i].Err = err
		}
	}
	return rs
}

// PipelineFailsWhole is a store whose Batch, like a Cluster client that
// fails a whole pipeline when one of its slots has no node, or an adapter
// that takes one command's failure for the round trip's, gives every
// command of a batch the first error of any, as an unknown outcome:
// commands that ran and got their replies included.
func PipelineFailsWhole(st store.Store) store.Store { return pipelineFailsWhole{st} }

type pipelineFailsWhole struct{ store.Store }

func (s pipelineFailsWhole) Batch(ctx context.Context, cmds []store.Cmd) []store.Reply {
	b, ok := s.Store.(store.Batcher)
	if !ok {
		rs := make([]store.Reply, len(cmds))
		for i := range rs {
			rs[i].Err = errors.New("knownbad: the store is not a Batcher")
		}
		return rs
	}
	rs := b.Batch(ctx, cmds)
	for _, r := range rs {
		if r.Err != nil && !errors.Is(r.Err, store.ErrNil) {
			err := fmt.Errorf("knownbad: %w: %w", store.ErrUnknownOutcome, r.Err)
			for i := range rs {
				rs[i] = store.Reply{Err: err}
			}
			break
		}
	}
	return rs
}

// RetryingBatch wraps st so that its Batch sends again every command whose
// reply was lost, as a hand-written pipeline loop with a retry does (Do
// and the script calls are st's own).
func RetryingBatch(st store.Store) store.Store { return retryingBatch{st} }

type retryingBatch struct{ store.Store }

func (s retryingBatch) Batch(ctx context.Context, cmds []store.Cmd) []store.Reply {
	b := s.Store.(store.Batcher)
	rs := b.Batch(ctx, cmds)
	var again []store.Cmd
	var at []int
	for i, r := range rs {
		if errors.Is(r.Err, store.ErrUnknownOutcome) {
			again, at = append(again, cmds[i]), append(at, i)
		}
	}
	if len(again) > 0 {
		for j, r := range b.Batch(ctx, again) {
			rs[at[j]] = r
		}
	}
	return rs
}

// UnmappedBatch wraps st so that the errors of its Batch lose their store
// sentinels (a lost reply is no longer ErrUnknownOutcome), as a Batch
// written over a client's pipeline that passes its errors through does.
func UnmappedBatch(st store.Store) store.Store { return unmappedBatch{st} }

type unmappedBatch struct{ store.Store }

func (s unmappedBatch) Batch(ctx context.Context, cmds []store.Cmd) []store.Reply {
	rs := s.Store.(store.Batcher).Batch(ctx, cmds)
	for i := range rs {
		rs[i].Err = strip(rs[i].Err)
	}
	return rs
}

// BatchIgnoresDeadline wraps st so that its Batch ignores the context's
// deadline (Do and the script calls keep it): a blackholed Redis holds
// Limiter.AllowMany past the Limiter's timeout.
func BatchIgnoresDeadline(st store.Store) store.Store { return batchIgnoresDeadline{st} }

type batchIgnoresDeadline struct{ store.Store }

func (s batchIgnoresDeadline) Batch(ctx context.Context, cmds []store.Cmd) []store.Reply {
	return s.Store.(store.Batcher).Batch(context.WithoutCancel(ctx), cmds)
}

// OneByOne wraps st so that Do sends a pipeline's commands one round trip
// each, as a client without pipelining does (a transaction, MULTI …
// EXEC, still goes whole): every decision of several commands costs as
// many round trips.
func OneByOne(st store.Store) store.Store { return oneByOne{st} }

type oneByOne struct{ store.Store }

func (s oneByOne) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if len(cmds) < 2 || store.IsTx(cmds) {
		return s.Store.Do(ctx, cmds...)
	}
	out := make([]store.Reply, 0, len(cmds))
	for _, c := range cmds {
		rs, err := s.Store.Do(ctx, c)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}
