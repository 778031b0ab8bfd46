package storetest

import (
	"context"
	"time"

	"github.com/quotagate/limiter/store"
)

// Late returns st with every reply handed back delay late (after the
// server has answered), as a congested network or a busy client does: a
// strategy that estimates the server's clock from its replies' round
// trips puts each reading in the middle of one. A store that pins
// connections (store.Watcher) keeps doing so.
func Late(st store.Store, delay time.Duration) store.Store {
	l := lateReplies{Store: st, delay: delay}
	if w, ok := st.(store.Watcher); ok {
		return lateWatcher{lateReplies: l, w: w}
	}
	return l
}

type lateReplies struct {
	store.Store
	delay time.Duration
}

func (s lateReplies) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	rs, err := s.Store.Do(ctx, cmds...)
	time.Sleep(s.delay)
	return rs, err
}

func (s lateReplies) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	v, err := s.Store.EvalSha(ctx, sha, keys, args)
	time.Sleep(s.delay)
	return v, err
}

func (s lateReplies) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	v, err := s.Store.Eval(ctx, src, keys, args)
	time.Sleep(s.delay)
	return v, err
}

// lateWatcher is lateReplies for a store.Watcher.
type lateWatcher struct {
	lateReplies
	w store.Watcher
}

func (s lateWatcher) Watch(ctx context.Context, keys []string, fn func(store.Tx) error) error {
	err := s.w.Watch(ctx, keys, fn)
	time.Sleep(s.delay)
	return err
}

// Moving returns st with advance(step) called before every command it
// sends: given a test server's virtual clock (redistest.Mini.Advance),
// every command reaches the server step later by the server's clock than
// the one before, as when each round trip is as long as step.
func Moving(st store.Store, advance func(time.Duration), step time.Duration) store.Store {
	return moving{Store: st, advance: advance, step: step}
}

type moving struct {
	store.Store
	advance func(time.Duration)
	step    time.Duration
}

func (s moving) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	s.advance(s.step)
	return s.Store.Do(ctx, cmds...)
}

func (s moving) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	s.advance(s.step)
	return s.Store.EvalSha(ctx, sha, keys, args)
}

func (s moving) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	s.advance(s.step)
	return s.Store.Eval(ctx, src, keys, args)
}
