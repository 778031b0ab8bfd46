package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/store/redigo"
	rueidisstore "github.com/quotagate/limiter/store/rueidis"
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
	ss, scripted := sp.s.(limiter.ScriptStrategy)
	if !scripted {
		return fmt.Errorf("%w: the many workload needs a strategy whose decision is one script (not %s)", errUsage, sp.name)
	}
	script, args, vary, err := rawArgs(ss, l, keyOf("bench-check"))
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
	raw := func(ctx context.Context, subject string) error { return pipe(ctx, keys[subject]) }

	for _, s := range all {
		defer func() { _ = lim.Reset(context.WithoutCancel(ctx), s, l) }()
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

// rawPipeline returns how a hand-written caller sends the script sha on
// several keys at once through st's client: given the arguments (as
// rawScript takes them), a call that sends one EVALSHA per key in one
// pipeline and fails on the first error among the replies.
func rawPipeline(st store.Store, sha string) (func(args []any, vary []int) func(ctx context.Context, keys []string) error, error) {
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
		return func(args []any, vary []int) func(context.Context, []string) error {
			return func(ctx context.Context, keys []string) error {
				p := rdb.Pipeline()
				for _, k := range keys {
					p.EvalSha(ctx, sha, []string{k}, argsFor(args, vary)...)
				}
				if _, err := p.Exec(ctx); err != nil {
					return fmt.Errorf("raw: %w", err)
				}
				return nil
			}
		}, nil
	case *rueidisstore.Store:
		c := s.Client()
		return func(args []any, vary []int) func(context.Context, []string) error {
			texts := make([]string, len(args))
			for i, a := range args {
				texts[i] = fmt.Sprint(a)
			}
			return func(ctx context.Context, keys []string) error {
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
				for _, r := range c.DoMulti(ctx, cmds...) {
					if err := r.Error(); err != nil {
						return fmt.Errorf("raw: %w", err)
					}
				}
				return nil
			}
		}, nil
	case *redigo.Store:
		p := s.Pool()
		return func(args []any, vary []int) func(context.Context, []string) error {
			return func(ctx context.Context, keys []string) error {
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
				for range keys {
					if _, err := conn.Receive(); err != nil {
						return fmt.Errorf("raw: %w", err)
					}
				}
				return nil
			}
		}, nil
	}
	return nil, fmt.Errorf("no raw baseline for a %T", st)
}
