package rules

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// Source loads a rule set. A Limiter calls Load once when it is made and
// again on every Reload (Watch polls). Load returns a valid Set or an error;
// a *ConfigError for an invalid one. Implementations are safe for
// concurrent use. The Set returned is not modified afterwards by the
// source.
type Source interface {
	Load(ctx context.Context) (*Set, error)
}

// Static returns a Source that always loads a copy of s, as it is now: a
// rule set written in Go.
func Static(s *Set) Source {
	if s == nil {
		return staticSource{err: &ConfigError{Source: "static set", Err: errors.New("nil set")}}
	}
	if err := s.Validate(); err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			ce.Source = "static set"
		}
		return staticSource{err: err}
	}
	c := s.clone()
	c.origin, c.hash = "static set", false
	return staticSource{set: c}
}

type staticSource struct {
	set *Set
	err error
}

// Load implements Source.
func (s staticSource) Load(context.Context) (*Set, error) {
	if s.err != nil {
		return nil, s.err
	}
	return s.set.clone(), nil
}

// File returns a Source that reads the rule set from the file at path on
// every Load: JSON when the name ends in ".json", YAML otherwise (see
// ParseYAML for the format). A Load that fails (a file that does not
// parse, or holds bad rules) leaves the last good rules in force until the
// next. Replace the file atomically (write another file, then rename it
// over this one): JSON cut short fails to parse, but YAML cut at a line
// break is often valid YAML with fewer rules, or a smaller number, and
// would be loaded as such.
func File(path string) Source { return fileSource(path) }

type fileSource string

// Load implements Source.
func (f fileSource) Load(context.Context) (*Set, error) {
	data, err := os.ReadFile(string(f))
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	parse := ParseYAML
	if strings.EqualFold(filepath.Ext(string(f)), ".json") {
		parse = ParseJSON
	}
	s, err := parse(data)
	if err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			ce.Source = "file " + string(f)
		}
		return nil, err
	}
	s.origin = "file " + string(f)
	return s, nil
}

// RedisHash is a Source that reads the rules from a Redis hash: one field
// per subject (such as an appkey-method), its value a JSON list of rules
// (see ParseRules):
//
//	HSET allRateLimitConfigs app-1-order.create '[{"name":"qps","rate":10,"period":"1s"},{"name":"qpd","rate":1000,"period":"1d"}]'
//
// It reads the hash with one HGETALL through the store, so it works on
// every adapter and on a Cluster. Write the hash with one HSET (or
// MULTI/EXEC) per change, so that a Load never sees half of it. The hash
// holds subjects only; the Default and FailMode come from here.
//
// Redis pub/sub is not part of the store contract, so the Limiter polls
// (Watch); to apply a change at once, call Limiter.Reload from whatever
// notifies you (your own subscriber, an admin endpoint).
type RedisHash struct {
	// Store reads the hash.
	Store store.Store
	// Key is the hash's key.
	Key string
	// Default is what happens to subjects that are not fields of the hash.
	Default Default
	// FailMode, when not nil, overrides the limiter's fail mode for these
	// rules.
	FailMode *limiter.FailMode
	// AllowEmpty accepts a missing or empty hash as a set without
	// subjects; by default it is ErrEmpty, which keeps the last good rules.
	AllowEmpty bool
}

// Load implements Source.
func (h RedisHash) Load(ctx context.Context) (*Set, error) {
	src := "redis hash " + strconv.Quote(h.Key)
	if h.Store == nil || h.Key == "" {
		return nil, &ConfigError{Source: src, Err: errors.New("RedisHash needs a Store and a Key")}
	}
	rs, err := h.Store.Do(ctx, store.Cmd{Name: "HGETALL", Args: []any{h.Key}})
	if err == nil {
		err = rs[0].Err
	}
	if err != nil {
		return nil, fmt.Errorf("rules: %s: HGETALL: %w", src, err)
	}
	arr, err := store.Slice(rs[0].Val)
	if err != nil || len(arr)%2 != 0 {
		return nil, fmt.Errorf("rules: %s: HGETALL reply %T of %d elements: %w", src, rs[0].Val, len(arr), err)
	}
	if len(arr) == 0 && !h.AllowEmpty {
		return nil, fmt.Errorf("%w: %s is missing or empty", ErrEmpty, src)
	}
	s := &Set{Subjects: make(map[string][]limiter.Limit, len(arr)/2), Default: h.Default, FailMode: h.FailMode, origin: src, hash: true}
	type field struct{ name, value string }
	fields := make([]field, 0, len(arr)/2)
	for i := 0; i < len(arr); i += 2 {
		name, err1 := store.String(arr[i])
		value, err2 := store.String(arr[i+1])
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("rules: %s: HGETALL reply: %w", src, err)
		}
		fields = append(fields, field{name, value})
	}
	sort.Slice(fields, func(i, j int) bool { return fields[i].name < fields[j].name })
	for _, f := range fields {
		path := strconv.Quote(f.name)
		v, err := decodeJSON([]byte(f.value))
		if err != nil {
			return nil, &ConfigError{Source: src, Field: path, Err: fmt.Errorf("value is not JSON: %w", err)}
		}
		ls, err := rulesFromTree(path, v)
		if err == nil {
			err = checkLimits(path, ls)
		}
		if err != nil {
			var ce *ConfigError
			if errors.As(err, &ce) {
				ce.Source = src
			}
			return nil, err
		}
		s.Subjects[f.name] = ls
	}
	if err := s.Validate(); err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			ce.Source = src
		}
		return nil, err
	}
	return s, nil
}
