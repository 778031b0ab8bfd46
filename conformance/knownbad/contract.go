package knownbad

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/quotagate/limiter/store"
)

// serverError reports whether err is a server's error reply as a store
// passes it on: not a nil reply, nor a failure of the round trip, nor one
// of the store's own refusals.
func serverError(err error) bool {
	return err != nil && !errors.Is(err, store.ErrNil) && !errors.Is(err, store.ErrUnknownOutcome) &&
		!errors.Is(err, store.ErrNotSupported) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)
}

// IntsAsText wraps st so that Do reads every integer reply that is not in
// an array as its decimal text ("4", not int64(4)), as an adapter written
// for GET's replies that reads each with redigo's redis.String, which
// converts an integer so, does: a caller's v.(int64) fails on a DEL's or
// an INCRBY's reply (store.Int64 still reads it, as it reads a counter's
// text).
func IntsAsText(st store.Store) store.Store { return intsAsText{st} }

type intsAsText struct{ store.Store }

func (s intsAsText) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	rs, err := s.Store.Do(ctx, cmds...)
	for i := range rs {
		if n, ok := rs[i].Val.(int64); ok {
			rs[i].Val = strconv.FormatInt(n, 10)
		}
	}
	return rs, err
}

// rawText is v with its strings, at any depth of an array, as []byte.
func rawText(v any) any {
	switch t := v.(type) {
	case string:
		return []byte(t)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = rawText(e)
		}
		return out
	}
	return v
}

// FloatsAlone wraps st so that a command sent alone through Do carries its
// float64 arguments as strconv.FormatFloat's shortest form ('g'), as
// redigo's Do writes them and as an adapter that converts arguments itself
// only on its pipeline path sends them: a float64 of 10^6 reaches Redis
// as "1e+06", which a SET stores as that text and an INCRBY or a PX
// refuses. A pipeline's arguments are st's own.
func FloatsAlone(st store.Store) store.Store { return floatsAlone{st} }

type floatsAlone struct{ store.Store }

func (s floatsAlone) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if len(cmds) == 1 {
		c := cmds[0]
		args := make([]any, len(c.Args))
		for i, a := range c.Args {
			if f, ok := a.(float64); ok {
				args[i] = strconv.FormatFloat(f, 'g', -1, 64)
				continue
			}
			args[i] = a
		}
		return s.Store.Do(ctx, store.Cmd{Name: c.Name, Args: args})
	}
	return s.Store.Do(ctx, cmds...)
}

// ErrorRepliesDropped wraps st so that a command's error reply in Do and
// in Batch becomes an empty reply, a nil value without an error, as an
// adapter that reads each command's value and looks only for a nil reply
// (go-redis's cmd.Val() is nil for a command that failed) does: a caller
// takes a refused INCRBY for a nil reply that is not ErrNil.
func ErrorRepliesDropped(st store.Store) store.Store { return errorRepliesDropped{st} }

type errorRepliesDropped struct{ store.Store }

func dropErrorReplies(rs []store.Reply) []store.Reply {
	for i := range rs {
		if serverError(rs[i].Err) {
			rs[i] = store.Reply{}
		}
	}
	return rs
}

func (s errorRepliesDropped) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	rs, err := s.Store.Do(ctx, cmds...)
	return dropErrorReplies(rs), err
}

func (s errorRepliesDropped) Batch(ctx context.Context, cmds []store.Cmd) []store.Reply {
	return dropErrorReplies(s.Store.(store.Batcher).Batch(ctx, cmds))
}

// NilForErrors wraps st so that a command's error reply in Do and in Batch
// is store.ErrNil, as an adapter that asks whether a reply's value is nil
// before it looks at the error does (a failed command's value is nil too):
// a refused INCRBY reads as a missing key.
func NilForErrors(st store.Store) store.Store { return nilForErrors{st} }

type nilForErrors struct{ store.Store }

func nilErrors(rs []store.Reply) []store.Reply {
	for i := range rs {
		if serverError(rs[i].Err) && rs[i].Val == nil {
			rs[i].Err = store.ErrNil
		}
	}
	return rs
}

func (s nilForErrors) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	rs, err := s.Store.Do(ctx, cmds...)
	return nilErrors(rs), err
}

func (s nilForErrors) Batch(ctx context.Context, cmds []store.Cmd) []store.Reply {
	return nilErrors(s.Store.(store.Batcher).Batch(ctx, cmds))
}

// ServerErrorsUnknown wraps st so that every error reply of the server
// (a command's in Do and in Batch, a script's) is also an unknown
// outcome, wrapping store.ErrUnknownOutcome, as an adapter that wraps
// every error its client returns so does, not telling a server's refusal
// from a lost reply: a caller takes a command the server refused, which
// ran nothing (a script's error, an INCRBY of a string), for one that may
// have run.
func ServerErrorsUnknown(st store.Store) store.Store { return serverErrorsUnknown{st} }

type serverErrorsUnknown struct{ store.Store }

func asUnknown(err error) error {
	if serverError(err) {
		return fmt.Errorf("knownbad: %w: %w", store.ErrUnknownOutcome, err)
	}
	return err
}

func (s serverErrorsUnknown) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	rs, err := s.Store.Do(ctx, cmds...)
	for i := range rs {
		rs[i].Err = asUnknown(rs[i].Err)
	}
	return rs, err
}

func (s serverErrorsUnknown) Batch(ctx context.Context, cmds []store.Cmd) []store.Reply {
	rs := s.Store.(store.Batcher).Batch(ctx, cmds)
	for i := range rs {
		rs[i].Err = asUnknown(rs[i].Err)
	}
	return rs
}

func (s serverErrorsUnknown) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	v, err := s.Store.EvalSha(ctx, sha, keys, args)
	return v, asUnknown(err)
}

func (s serverErrorsUnknown) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	v, err := s.Store.Eval(ctx, src, keys, args)
	return v, asUnknown(err)
}

// BatchNeedsKeys wraps st with a Batch that refuses a command without a
// key (PING, an EVAL of no keys) that it should send, as a Batch written
// for a Cluster, which routes each command by its key's slot, does when it
// finds none to route by: the commands with keys are answered, the others
// fail, though any node (and a single server) would run them.
func BatchNeedsKeys(st store.Store) store.Store { return batchNeedsKeys{st} }

type batchNeedsKeys struct{ store.Store }

func (s batchNeedsKeys) Batch(ctx context.Context, cmds []store.Cmd) []store.Reply {
	rs := make([]store.Reply, len(cmds))
	var send []store.Cmd
	var at []int
	for i, c := range cmds {
		if c.Key() == "" && !store.ConnCommand(c) {
			rs[i].Err = fmt.Errorf("knownbad: %s has no key to route it by", c.Name)
			continue
		}
		send, at = append(send, c), append(at, i)
	}
	if len(send) > 0 {
		for j, r := range s.Store.(store.Batcher).Batch(ctx, send) {
			rs[at[j]] = r
		}
	}
	return rs
}

// RawEvalReply wraps st so that the reply of Eval, which Script.Run sends
// only after a NOSCRIPT, keeps its text as []byte, as an adapter that
// converts EVALSHA's reply and passes EVAL's, its rarely taken path, on as
// its client gave it (redigo's bulk strings are []byte) does: a script's
// first call after its load reads differently from every later one.
func RawEvalReply(st store.Store) store.Store { return rawEvalReply{st} }

type rawEvalReply struct{ store.Store }

func (s rawEvalReply) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	v, err := s.Store.Eval(ctx, src, keys, args)
	return rawText(v), err
}

// RawEvalShaReply wraps st so that the reply of EvalSha keeps its text as
// []byte (Eval's, the NOSCRIPT fallback's, converted), as an adapter that
// converts the reply on one script path and not on the other does: every
// call of a cached script reads differently from its first.
func RawEvalShaReply(st store.Store) store.Store { return rawEvalShaReply{st} }

type rawEvalShaReply struct{ store.Store }

func (s rawEvalShaReply) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	v, err := s.Store.EvalSha(ctx, sha, keys, args)
	return rawText(v), err
}

// UnmappedTx wraps st (a store.Watcher) so that the errors of a Watch's Tx
// lose their store sentinels, as an adapter that maps its client's errors
// in Do, Batch and the script calls and passes them through in its Tx
// does: a refused MULTI or SELECT on the pinned connection is no longer
// store.ErrNotSupported (nor an aborted EXEC store.ErrTxAborted).
func UnmappedTx(st store.Store) store.Store {
	return txWrap{Store: st, tx: func(tx store.Tx) store.Tx { return unmappedTx{tx} }}
}

type unmappedTx struct{ store.Tx }

func (t unmappedTx) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	rs, err := t.Tx.Do(ctx, cmds...)
	for i := range rs {
		rs[i].Err = strip(rs[i].Err)
	}
	return rs, strip(err)
}

func (t unmappedTx) Exec(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	rs, err := t.Tx.Exec(ctx, cmds...)
	for i := range rs {
		rs[i].Err = strip(rs[i].Err)
	}
	return rs, strip(err)
}

// TxRefusesWatch wraps st (a store.Watcher) so that a Watch's Tx.Do
// refuses what Store.Do refuses (store.CheckConnCommands), WATCH and
// UNWATCH among them, as an adapter that reuses its Do's check for its Tx
// does: a strategy that watches one key more once it has read which (a
// key named by what it found) cannot.
func TxRefusesWatch(st store.Store) store.Store {
	return txWrap{Store: st, tx: func(tx store.Tx) store.Tx { return refusesWatch{tx} }}
}

type refusesWatch struct{ store.Tx }

func (t refusesWatch) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if err := store.CheckConnCommands(cmds); err != nil {
		return nil, err
	}
	return t.Tx.Do(ctx, cmds...)
}

// txWrap is st, a store.Watcher, with every Watch's Tx wrapped by tx.
type txWrap struct {
	store.Store
	tx func(store.Tx) store.Tx
}

func (s txWrap) Watch(ctx context.Context, keys []string, fn func(store.Tx) error) error {
	w, ok := s.Store.(store.Watcher)
	if !ok {
		return fmt.Errorf("knownbad: the store is not a Watcher: %w", store.ErrNotSupported)
	}
	return w.Watch(ctx, keys, func(tx store.Tx) error { return fn(s.tx(tx)) })
}

// UnmappedScripts wraps st so that a lost reply to a script call (EvalSha,
// Eval) is a plain error, without store.ErrUnknownOutcome, while its
// Batch, st's own, keeps it: an adapter that maps its client's errors in
// the Batch written over its pipeline and passes them through on its
// script calls. A caller, the Limiter's fail mode among them, takes a
// decision that may have been counted for one that never reached Redis.
func UnmappedScripts(st store.Store) store.Store { return unmappedScripts{st} }

type unmappedScripts struct{ store.Store }

func (s unmappedScripts) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	v, err := s.Store.EvalSha(ctx, sha, keys, args)
	return v, stripUnknown(err)
}

func (s unmappedScripts) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	v, err := s.Store.Eval(ctx, src, keys, args)
	return v, stripUnknown(err)
}

func (s unmappedScripts) Batch(ctx context.Context, cmds []store.Cmd) []store.Reply {
	return s.Store.(store.Batcher).Batch(ctx, cmds)
}
