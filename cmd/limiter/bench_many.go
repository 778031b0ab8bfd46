package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/benchkit"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/store/redigo"
	rueidisstore "github.com/quotagate/limiter/store/rueidis"
	"github.com/quotagate/limiter/strategy"
)

// manyPerCall is how many subjects each call of the many workload decides.
const manyPerCall = 16

// benchMany measures the many workload: each call decides manyPerCall
// subjects (those of a caller's subject, with "-0" to "-15" appended), by
// one Limiter.AllowMany against the client's own pipeline of one EVALSHA
// of the strategy's script per subject (what a user batching by hand
// writes), every decision admitted. Decisions per second count every
// subject; the latencies are of whole calls.
func benchMany(ctx context.Context, lv level, st store.Store, lim *limiter.Limiter, sp benchStrategy, l limiter.Limit, keyOf func(string) string, done func(benchRow)) error {
	script, args, vary, err := manyArgs(sp, l, keyOf("bench-check"))
	if err != nil {
		return err
	}
	// AllowMany sends the script's many-request companion: the script
	// itself is loaded for the raw calls here.
	if _, err := st.Do(ctx, store.Cmd{Name: "SCRIPT", Args: []any{"LOAD", script.Source()}}); err != nil {
		return fmt.Errorf("raw: SCRIPT LOAD: %w", err)
	}
	prep, err := rawPipeline(st, script.Hash())
	if err != nil {
		return err
	}
	pipe := prep(args, vary)

	// Each subject's asks and raw keys, made once and only read while the
	// callers run.
	asks := map[string][]limiter.Ask{}
	keys := map[string][]string{}
	var all []string
	for _, ss := range append(lv.kit.Subjects, []string{"bench-check"}) {
		for _, s := range ss {
			if _, ok := asks[s]; ok {
				continue
			}
			for i := range manyPerCall {
				sub := s + "-" + strconv.Itoa(i)
				want, err := limiter.Key(lim.Prefix(), sub, l)
				if err != nil {
					return err
				}
				if keyOf(sub) != want {
					return fmt.Errorf("raw: key %q for %q, the limiter names %q", keyOf(sub), sub, want)
				}
				asks[s] = append(asks[s], limiter.Ask{Key: sub, Cost: 1, Limits: []limiter.Limit{l}})
				keys[s] = append(keys[s], want)
				all = append(all, sub)
			}
		}
	}
	allow := func(ctx context.Context, subject string) error {
		for i, a := range lim.AllowMany(ctx, asks[subject]) {
			if a.Err != nil {
				return fmt.Errorf("limiter: %s: %w", asks[subject][i].Key, a.Err)
			}
			if !a.Result.Allowed {
				return fmt.Errorf("limiter: %s: denied in the many workload", asks[subject][i].Key)
			}
		}
		return nil
	}
	raw := func(ctx context.Context, subject string) error { return pipe(ctx, keys[subject], nil) }
	if sp.aligned {
		raw = alignedPipe(l, keys, pipe)
	}

	defer resetAll(ctx, lim, all, l)
	for _, s := range all {
		if err := lim.Reset(ctx, s, l); err != nil {
			return err
		}
	}
	// The first calls load the scripts; for FixedWindow, one call of each
	// must leave every counter of the subjects at 2.
	if err := allow(ctx, "bench-check"); err != nil {
		return err
	}
	if err := raw(ctx, "bench-check"); err != nil {
		return err
	}
	if sp.name == "fixedwindow" {
		for _, a := range asks["bench-check"] {
			if res, err := lim.Peek(ctx, a.Key, l); err != nil || res.Remaining != benchRate-2 {
				return fmt.Errorf("after one call of each, %s has %d remaining (%v), want %d: raw and limiter count apart", a.Key, res.Remaining, err, int64(benchRate-2))
			}
		}
	}
	lv.per = manyPerCall
	return lv.measure(raw, allow, done)
}

// manyArgs returns the script the many workload's raw pipeline sends for
// strategy sp and limit l, and its arguments (as rawArgs returns them).
func manyArgs(sp benchStrategy, l limiter.Limit, key string) (*store.Script, []any, []int, error) {
	if sp.aligned {
		return strategy.AlignedWindowScript(), []any{l.Rate}, nil, nil
	}
	ss, scripted := sp.s.(limiter.ScriptStrategy)
	if !scripted {
		return nil, nil, nil, fmt.Errorf("%w: the many workload needs a strategy whose decision is one script (not %s)", errUsage, sp.name)
	}
	return rawArgs(ss, l, key)
}

// alignedPipe is the many workload's raw baseline for AlignedWindow: one
// EVALSHA per subject in one pipeline, each subject's key followed by the
// limit's period in milliseconds and the index of the window the app's
// clock plus its offset to the server's is in. A call that reaches the
// server outside that window is counted nowhere and answered {-1,
// seconds, microseconds} of the server's TIME: the offset is taken from
// it, and such calls go again in another pipeline.
func alignedPipe(l limiter.Limit, keys map[string][]string, pipe func(context.Context, []string, []any) error) benchkit.Decide {
	p := l.Period.Milliseconds()
	ps := ":" + strconv.FormatInt(p, 10) + ":"
	var offset atomic.Int64 // ms, server - app
	return func(ctx context.Context, subject string) error {
		todo := keys[subject]
		ms := time.Now().UnixMilli() + offset.Load()
		for range 3 {
			named := make([]string, len(todo))
			for i, k := range todo {
				named[i] = k + ps + strconv.FormatInt(ms/p, 10)
			}
			replies := make([]any, len(todo))
			if err := pipe(ctx, named, replies); err != nil {
				return err
			}
			var again []string
			for i, v := range replies {
				if at, stale := alignedStale(v, &offset); stale {
					ms = at
					again = append(again, todo[i])
				}
			}
			if len(again) == 0 {
				return nil
			}
			todo = again
		}
		return fmt.Errorf("raw: 3 pipelines for %s named windows the server's clock was not in", subject)
	}
}

// rawPipeline returns how a hand-written caller sends the script sha on
// several keys at once through st's client: given the arguments (as
// rawScript takes them), a call that sends one EVALSHA per key in one
// pipeline, fails on the first error among the replies and, given a
// replies slice (one per key), puts each reply's value in it.
func rawPipeline(st store.Store, sha string) (func(args []any, vary []int) func(ctx context.Context, keys []string, replies []any) error, error) {
	// argsFor returns the arguments of one call: args, with those at vary
	// drawn anew.
	argsFor := func(args []any, vary []int) []any {
		if len(vary) == 0 {
			return args
		}
		a := append(make([]any, 0, len(args)), args...)
		for _, i := range vary {
			a[i] = rand.Int64()
		}
		return a
	}
	switch s := st.(type) {
	case *goredis.Store:
		rdb := s.Client()
		return func(args []any, vary []int) func(context.Context, []string, []any) error {
			return func(ctx context.Context, keys []string, replies []any) error {
				p := rdb.Pipeline()
				for _, k := range keys {
					p.EvalSha(ctx, sha, []string{k}, argsFor(args, vary)...)
				}
				cmds, err := p.Exec(ctx)
				if err != nil {
					return fmt.Errorf("raw: %w", err)
				}
				if replies != nil {
					for i, c := range cmds {
						replies[i] = c.(*redis.Cmd).Val()
					}
				}
				return nil
			}
		}, nil
	case *rueidisstore.Store:
		c := s.Client()
		return func(args []any, vary []int) func(context.Context, []string, []any) error {
			texts := make([]string, len(args))
			for i, a := range args {
				texts[i] = fmt.Sprint(a)
			}
			return func(ctx context.Context, keys []string, replies []any) error {
				cmds := make(rueidis.Commands, 0, len(keys))
				for _, k := range keys {
					t := texts
					if len(vary) > 0 {
						t = append(make([]string, 0, len(texts)), texts...)
						for _, i := range vary {
							t[i] = strconv.FormatInt(rand.Int64(), 10)
						}
					}
					cmds = append(cmds, c.B().Evalsha().Sha1(sha).Numkeys(1).Key(k).Arg(t...).Build())
				}
				for i, r := range c.DoMulti(ctx, cmds...) {
					if err := r.Error(); err != nil {
						return fmt.Errorf("raw: %w", err)
					}
					if replies != nil {
						v, err := r.ToAny()
						if err != nil {
							return fmt.Errorf("raw: %w", err)
						}
						replies[i] = v
					}
				}
				return nil
			}
		}, nil
	case *redigo.Store:
		p := s.Pool()
		return func(args []any, vary []int) func(context.Context, []string, []any) error {
			return func(ctx context.Context, keys []string, replies []any) error {
				conn, err := p.GetContext(ctx)
				if err != nil {
					return fmt.Errorf("raw: %w", err)
				}
				defer conn.Close()
				for _, k := range keys {
					a := append([]any{sha, 1, k}, argsFor(args, vary)...)
					if err := conn.Send("EVALSHA", a...); err != nil {
						return fmt.Errorf("raw: %w", err)
					}
				}
				if err := conn.Flush(); err != nil {
					return fmt.Errorf("raw: %w", err)
				}
				for i := range keys {
					v, err := conn.Receive()
					if err != nil {
						return fmt.Errorf("raw: %w", err)
					}
					if replies != nil {
						replies[i] = v
					}
				}
				return nil
			}
		}, nil
	}
	return nil, fmt.Errorf("no raw baseline for a %T", st)
}
