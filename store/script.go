package store

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
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
