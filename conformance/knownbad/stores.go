package knownbad

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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

// NoScriptFallbackBatch wraps st so that its Batch sends a script's
// source (EVAL) only if it was never sent before (by Eval or by Batch),
// and refuses it otherwise, as a pipeline that takes a script it has sent
// once for cached for good (Do and the script calls are st's own): once
// the server has lost its scripts (SCRIPT FLUSH, a restart), every batched
// call of a script sent before fails. It reaches one server when st does
// (store.OneServer).
func NoScriptFallbackBatch(st store.Store) store.Store {
	return &noFallbackBatch{Store: st, sent: make(map[string]bool)}
}

type noFallbackBatch struct {
	store.Store
	mu   sync.Mutex
	sent map[string]bool // the sources sent with EVAL
}

func (s *noFallbackBatch) Batch(ctx context.Context, cmds []store.Cmd) []store.Reply {
	rs := make([]store.Reply, len(cmds))
	send := make([]store.Cmd, 0, len(cmds))
	var at []int
	s.mu.Lock()
	for i, c := range cmds {
		if src, ok := evalSource(c); ok {
			if s.sent[src] {
				rs[i].Err = errors.New("knownbad: NOSCRIPT and no fallback")
				continue
			}
			s.sent[src] = true
		}
		send, at = append(send, c), append(at, i)
	}
	s.mu.Unlock()
	if len(send) > 0 {
		for j, r := range s.Store.(store.Batcher).Batch(ctx, send) {
			rs[at[j]] = r
		}
	}
	return rs
}

func (s *noFallbackBatch) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	s.mu.Lock()
	s.sent[src] = true
	s.mu.Unlock()
	return s.Store.Eval(ctx, src, keys, args)
}

// OneServer is st's: on one server, Limiter.AllowMany sends its calls in
// many-request script calls through Batch.
func (s *noFallbackBatch) OneServer() bool {
	o, ok := s.Store.(store.OneServer)
	return ok && o.OneServer()
}

// evalSource is the script source an EVAL command sends.
func evalSource(c store.Cmd) (string, bool) {
	if !strings.EqualFold(c.Name, "EVAL") || len(c.Args) == 0 {
		return "", false
	}
	src, ok := c.Args[0].(string)
	return src, ok
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
	again, at := lost(cmds, rs)
	if len(again) > 0 {
		for j, r := range b.Batch(ctx, again) {
			rs[at[j]] = r
		}
	}
	return rs
}

// lost returns the commands of cmds whose replies in rs were lost (an
// unknown outcome) and where they are in cmds.
func lost(cmds []store.Cmd, rs []store.Reply) (again []store.Cmd, at []int) {
	for i, r := range rs {
		if errors.Is(r.Err, store.ErrUnknownOutcome) {
			again, at = append(again, cmds[i]), append(at, i)
		}
	}
	return again, at
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

// UnmappedDo wraps st so that the errors of Do lose their store sentinels
// (the script calls keep theirs), as an adapter that maps its client's
// errors on the script path and passes them through on the plain one
// does: a refused lone MULTI or SELECT is no longer store.ErrNotSupported,
// and a caller cannot tell it from a server's error reply.
func UnmappedDo(st store.Store) store.Store { return unmappedDo{st} }

type unmappedDo struct{ store.Store }

func (s unmappedDo) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	rs, err := s.Store.Do(ctx, cmds...)
	for i := range rs {
		rs[i].Err = strip(rs[i].Err)
	}
	return rs, strip(err)
}

// LateDeadline wraps st so that a call's context is looked at only once
// its reply is in, as an adapter that calls its client without the
// context (or with one bounding only the send) and then returns
// ctx.Err() does: the error is right (an unknown outcome, past the
// deadline), but a slow or blackholed Redis holds every call for as long
// as the reply takes, whatever the Limiter's timeout.
func LateDeadline(st store.Store) store.Store { return lateDeadline{st} }

type lateDeadline struct{ store.Store }

func late(ctx context.Context, err error) error {
	if err == nil && ctx.Err() != nil {
		return fmt.Errorf("knownbad: %w: %w", store.ErrUnknownOutcome, ctx.Err())
	}
	return err
}

func (s lateDeadline) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	rs, err := s.Store.Do(context.WithoutCancel(ctx), cmds...)
	if err = late(ctx, err); err != nil {
		return nil, err
	}
	return rs, nil
}

func (s lateDeadline) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	v, err := s.Store.EvalSha(context.WithoutCancel(ctx), sha, keys, args)
	if err = late(ctx, err); err != nil {
		return nil, err
	}
	return v, nil
}

func (s lateDeadline) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	v, err := s.Store.Eval(context.WithoutCancel(ctx), src, keys, args)
	if err = late(ctx, err); err != nil {
		return nil, err
	}
	return v, nil
}

// StaleReplies wraps st as one connection that a call past its deadline
// leaves with its reply still to come, and that the next call uses
// without draining it, as a hand-written pool that puts a timed-out
// connection back does: the next call reads the late reply as its own
// (and leaves its own for the one after). A user sees every decision
// after a slow reply answered with an earlier call's Remaining.
func StaleReplies(st store.Store) store.Store { return &staleReplies{Store: st} }

type staleReplies struct {
	store.Store
	mu   sync.Mutex
	owed []chan staleReply // the replies the connection still owes, oldest first
}

type staleReply struct {
	v   any
	rs  []store.Reply
	err error
}

// call sends f on the connection and returns the oldest reply it owes.
func (s *staleReplies) call(ctx context.Context, f func(context.Context) staleReply) staleReply {
	s.mu.Lock()
	defer s.mu.Unlock()
	own := make(chan staleReply, 1)
	go func() { own <- f(context.WithoutCancel(ctx)) }()
	s.owed = append(s.owed, own)
	select {
	case r := <-s.owed[0]:
		s.owed = s.owed[1:]
		return r
	case <-ctx.Done():
		return staleReply{err: fmt.Errorf("knownbad: %w: %w", store.ErrUnknownOutcome, ctx.Err())}
	}
}

func (s *staleReplies) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	// (the call outlives its return: it keeps copies of what the caller
	// may reuse after it)
	cmds = slices.Clone(cmds)
	for i := range cmds {
		cmds[i].Args = slices.Clone(cmds[i].Args)
	}
	r := s.call(ctx, func(ctx context.Context) staleReply {
		rs, err := s.Store.Do(ctx, cmds...)
		return staleReply{rs: rs, err: err}
	})
	if r.err == nil && len(r.rs) != len(cmds) {
		return nil, fmt.Errorf("knownbad: %d replies for %d commands", len(r.rs), len(cmds))
	}
	return r.rs, r.err
}

func (s *staleReplies) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	keys, args = slices.Clone(keys), slices.Clone(args)
	r := s.call(ctx, func(ctx context.Context) staleReply {
		v, err := s.Store.EvalSha(ctx, sha, keys, args)
		return staleReply{v: v, err: err}
	})
	return r.v, r.err
}

func (s *staleReplies) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	keys, args = slices.Clone(keys), slices.Clone(args)
	r := s.call(ctx, func(ctx context.Context) staleReply {
		v, err := s.Store.Eval(ctx, src, keys, args)
		return staleReply{v: v, err: err}
	})
	return r.v, r.err
}

// SlowRecovery wraps st with a circuit breaker that, once a call fails
// for want of Redis (its outcome unknown: a timeout, a broken
// connection), refuses every call for five seconds without trying, as a
// breaker with a long cool-down, or a pool that redials only on its
// health check's interval, does: a user sees decisions fail (or the fail
// mode's) for seconds after Redis is back.
func SlowRecovery(st store.Store) store.Store { return &slowRecovery{Store: st} }

type slowRecovery struct {
	store.Store
	mu     sync.Mutex
	openAt time.Time // when the breaker last opened
}

const slowRecoveryCoolDown = 5 * time.Second

func (s *slowRecovery) before() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.openAt.IsZero() && time.Since(s.openAt) < slowRecoveryCoolDown {
		return fmt.Errorf("knownbad: circuit open since %s", s.openAt.Format(time.StampMilli))
	}
	return nil
}

func (s *slowRecovery) after(err error) error {
	if errors.Is(err, store.ErrUnknownOutcome) {
		s.mu.Lock()
		s.openAt = time.Now()
		s.mu.Unlock()
	}
	return err
}

func (s *slowRecovery) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if err := s.before(); err != nil {
		return nil, err
	}
	rs, err := s.Store.Do(ctx, cmds...)
	return rs, s.after(err)
}

func (s *slowRecovery) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	if err := s.before(); err != nil {
		return nil, err
	}
	v, err := s.Store.EvalSha(ctx, sha, keys, args)
	return v, s.after(err)
}

func (s *slowRecovery) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	if err := s.before(); err != nil {
		return nil, err
	}
	v, err := s.Store.Eval(ctx, src, keys, args)
	return v, s.after(err)
}

// DeadlineKnownOutcome wraps st so that a call past its deadline returns
// the context's error alone, without store.ErrUnknownOutcome, as an
// adapter that returns ctx.Err() once its context is done does: a caller
// (the Limiter's give-backs and retries among them) takes a command that
// reached the server, and may have counted, for one never sent.
func DeadlineKnownOutcome(st store.Store) store.Store { return deadlineKnown{st} }

type deadlineKnown struct{ store.Store }

func knownOutcome(err error) error {
	if errors.Is(err, store.ErrUnknownOutcome) && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("knownbad: %w", context.DeadlineExceeded)
	}
	return err
}

func (s deadlineKnown) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	rs, err := s.Store.Do(ctx, cmds...)
	return rs, knownOutcome(err)
}

func (s deadlineKnown) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	v, err := s.Store.EvalSha(ctx, sha, keys, args)
	return v, knownOutcome(err)
}

func (s deadlineKnown) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	v, err := s.Store.Eval(ctx, src, keys, args)
	return v, knownOutcome(err)
}

// TimeoutNotDeadline wraps st so that a call past its deadline returns
// its own timeout error, an unknown outcome that does not wrap
// context.DeadlineExceeded, as an adapter that reports its client's
// "i/o timeout" does: a user's errors.Is(err, context.DeadlineExceeded)
// (a 503 rather than a 500, a metric of timeouts) never matches.
func TimeoutNotDeadline(st store.Store) store.Store { return timeoutNotDeadline{st} }

type timeoutNotDeadline struct{ store.Store }

func ownTimeout(err error) error {
	if errors.Is(err, store.ErrUnknownOutcome) && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("knownbad: %w: read: i/o timeout", store.ErrUnknownOutcome)
	}
	return err
}

func (s timeoutNotDeadline) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	rs, err := s.Store.Do(ctx, cmds...)
	return rs, ownTimeout(err)
}

func (s timeoutNotDeadline) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	v, err := s.Store.EvalSha(ctx, sha, keys, args)
	return v, ownTimeout(err)
}

func (s timeoutNotDeadline) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	v, err := s.Store.Eval(ctx, src, keys, args)
	return v, ownTimeout(err)
}
