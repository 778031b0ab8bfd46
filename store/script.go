package store

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
)

// Script is a Lua script known by its source and SHA1. Run uses EVALSHA and
// falls back to EVAL when the server answers NOSCRIPT, so a restart, a
// failover or SCRIPT FLUSH is invisible to callers. The fallback is written
// here once; adapters only implement EvalSha and Eval.
type Script struct {
	src string
	sha string
}

// NewScript returns the Script for the Lua source src.
func NewScript(src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{src: src, sha: hex.EncodeToString(sum[:])}
}

// Hash returns the script's SHA1 as EVALSHA takes it.
func (s *Script) Hash() string { return s.sha }

// Source returns the script's Lua source.
func (s *Script) Source() string { return s.src }

// Run evaluates the script on st with keys and args. NOSCRIPT is answered by
// sending the source with EVAL, once. A Cluster's TRYAGAIN (ErrTryAgain: the
// call's keys are split by a slot migration, and it did not run) is answered
// by sending the call again after a pause, while TryAgainPause allows. A
// lost reply is never retried: the error wraps ErrUnknownOutcome.
func (s *Script) Run(ctx context.Context, st Store, keys []string, args []any) (any, error) {
	v, err := st.EvalSha(ctx, s.sha, keys, args)
	if err != nil {
		return s.runAgain(ctx, st, keys, args, err)
	}
	return v, nil
}

// runAgain is Run after its EVALSHA failed with err.
//
//go:noinline
func (s *Script) runAgain(ctx context.Context, st Store, keys []string, args []any, err error) (any, error) {
	return sendAgain(ctx, err,
		func() (any, error) { return st.EvalSha(ctx, s.sha, keys, args) },
		func() (any, error) { return st.Eval(ctx, s.src, keys, args) })
}

// sendAgain answers a script call's error err: NOSCRIPT by calling eval
// (once: the source is then in the cache), TRYAGAIN by calling the last
// of evalSha and eval again after TryAgainPause; any other error, or a
// TRYAGAIN TryAgainPause gives up on, is returned.
func sendAgain[T any](ctx context.Context, err error, evalSha, eval func() (T, error)) (T, error) {
	var v T
	evaled := false
	for try := 1; err != nil; {
		switch {
		case !evaled && errors.Is(err, ErrNoScript):
			evaled = true
		case errors.Is(err, ErrTryAgain) && TryAgainPause(ctx, try):
			try++
		default:
			return v, err
		}
		if evaled {
			v, err = eval()
		} else {
			v, err = evalSha()
		}
	}
	return v, nil
}

// Int64sEvaler is the optional ability of a store to run a script whose
// arguments and reply are all integers (a rate-limiting script's usually
// are) without boxing each one in an interface. Script uses it through
// RunInt64s when the store has it.
//
// Implementations append the reply's integers to dst and return the
// extended slice: an array's elements, or an integer reply as one value
// (a script's common path may return a bare integer, which Redis sends
// without an array around it). They keep neither keys, args nor dst after
// returning. Any other reply is an error, never zeros.
type Int64sEvaler interface {
	// EvalShaInt64s is EvalSha with integer arguments and reply.
	EvalShaInt64s(ctx context.Context, sha string, keys []string, args []int64, dst []int64) ([]int64, error)
	// EvalInt64s is Eval with integer arguments and reply.
	EvalInt64s(ctx context.Context, src string, keys []string, args []int64, dst []int64) ([]int64, error)
}

// RunInt64s is Run for a script whose arguments and reply are integers: the
// reply's integers are appended to dst, so a caller with room in dst
// allocates nothing for them. It uses the store's Int64sEvaler when it has
// one; otherwise it passes args to Run as int64 values and converts the
// reply with Int64. The NOSCRIPT fallback and the sends after TRYAGAIN are
// Run's.
func (s *Script) RunInt64s(ctx context.Context, st Store, keys []string, args []int64, dst []int64) ([]int64, error) {
	if ev, ok := st.(Int64sEvaler); ok {
		v, err := ev.EvalShaInt64s(ctx, s.sha, keys, args, dst)
		if err != nil {
			return s.runInt64sAgain(ctx, ev, keys, args, dst, err)
		}
		return v, nil
	}
	return s.runBoxed(ctx, st, keys, args, dst)
}

// runInt64sAgain is runAgain for RunInt64s.
//
//go:noinline
func (s *Script) runInt64sAgain(ctx context.Context, ev Int64sEvaler, keys []string, args []int64, dst []int64, err error) ([]int64, error) {
	return sendAgain(ctx, err,
		func() ([]int64, error) { return ev.EvalShaInt64s(ctx, s.sha, keys, args, dst) },
		func() ([]int64, error) { return ev.EvalInt64s(ctx, s.src, keys, args, dst) })
}

// runBoxed is RunInt64s on a store without Int64sEvaler.
//
//go:noinline
func (s *Script) runBoxed(ctx context.Context, st Store, keys []string, args []int64, dst []int64) ([]int64, error) {
	boxed := make([]any, len(args))
	for i, a := range args {
		boxed[i] = a
	}
	v, err := s.Run(ctx, st, keys, boxed)
	if err != nil {
		return nil, err
	}
	return AppendInt64s(dst, v)
}

// AppendInt64s appends the integers of an array reply to dst, converting
// each element with Int64, or an integer reply (int64) as one value; any
// other reply or element is an error.
func AppendInt64s(dst []int64, v any) ([]int64, error) {
	if n, ok := v.(int64); ok {
		return append(dst, n), nil
	}
	arr, err := Slice(v)
	if err != nil {
		return nil, err
	}
	for i, e := range arr {
		if ee, ok := e.(error); ok {
			// The script ran and replied with an error among its values:
			// the server's message, but not its identity, which would make
			// a NOSCRIPT element look like the call's own NOSCRIPT, and
			// Run would send the script again.
			return nil, fmt.Errorf("store: element %d: error reply: %v", i, ee)
		}
		n, err := Int64(e)
		if err != nil {
			return nil, fmt.Errorf("store: element %d: %w", i, err)
		}
		dst = append(dst, n)
	}
	return dst, nil
}
