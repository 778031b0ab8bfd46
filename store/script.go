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
// sending the source with EVAL, once. A lost reply is never retried: the
// error wraps ErrUnknownOutcome.
func (s *Script) Run(ctx context.Context, st Store, keys []string, args []any) (any, error) {
	v, err := st.EvalSha(ctx, s.sha, keys, args)
	if err != nil && errors.Is(err, ErrNoScript) {
		return st.Eval(ctx, s.src, keys, args)
	}
	return v, err
}

// Int64sEvaler is the optional ability of a store to run a script whose
// reply is an array of integers and return the integers without boxing each
// one in an interface (a rate-limiting script's reply usually is). Script
// uses it through RunInt64s when the store has it.
type Int64sEvaler interface {
	// EvalShaInt64s is EvalSha for a reply that is an array of integers.
	EvalShaInt64s(ctx context.Context, sha string, keys []string, args []any) ([]int64, error)
	// EvalInt64s is Eval for a reply that is an array of integers.
	EvalInt64s(ctx context.Context, src string, keys []string, args []any) ([]int64, error)
}

// RunInt64s is Run for a script whose reply is an array of integers. It
// uses the store's Int64sEvaler when it has one; otherwise it runs Run and
// appends the integers to dst, so a caller with room in dst allocates
// nothing for them. The NOSCRIPT fallback is the same.
func (s *Script) RunInt64s(ctx context.Context, st Store, keys []string, args []any, dst []int64) ([]int64, error) {
	ev, ok := st.(Int64sEvaler)
	if !ok {
		v, err := s.Run(ctx, st, keys, args)
		if err != nil {
			return nil, err
		}
		arr, err := Slice(v)
		if err != nil {
			return nil, err
		}
		for i, e := range arr {
			n, err := Int64(e)
			if err != nil {
				return nil, fmt.Errorf("store: element %d: %w", i, err)
			}
			dst = append(dst, n)
		}
		return dst, nil
	}
	v, err := ev.EvalShaInt64s(ctx, s.sha, keys, args)
	if err != nil && errors.Is(err, ErrNoScript) {
		return ev.EvalInt64s(ctx, s.src, keys, args)
	}
	return v, err
}
