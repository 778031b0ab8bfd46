package rueidis

import (
	"fmt"
	"sort"
	"strconv"

	rd "github.com/redis/rueidis"
)

// value normalises a reply that is neither an error nor nil at the top
// level: integers to int64, strings to string, arrays and sets to []any,
// RESP3 maps to a flattened []any of key, value, ..., booleans to int64 1
// or 0, doubles and big numbers to their text. Inside an array, a nil is
// nil and an error reply is an error value. sc, when not nil and large
// enough, holds a top-level array and its integers.
func value(m *rd.RedisMessage) any {
	switch {
	case m.IsInt64():
		n, _ := m.AsInt64()
		return n
	case m.IsString():
		s, _ := m.ToString()
		return s
	case m.IsArray():
		es, _ := m.ToArray()
		return array(es)
	case m.IsMap():
		kv, err := m.ToMap() // string keys only
		if err != nil {
			return err
		}
		keys := make([]string, 0, len(kv))
		for k := range kv {
			keys = append(keys, k)
		}
		sort.Strings(keys) // a Go map has no order: make it deterministic
		out := make([]any, 0, 2*len(kv))
		for _, k := range keys {
			v := kv[k]
			out = append(out, k, elem(&v))
		}
		return out
	case m.IsNil():
		return nil
	case m.IsBool():
		if b, _ := m.AsBool(); b {
			return int64(1)
		}
		return int64(0)
	case m.IsFloat64():
		if f, err := m.AsFloat64(); err == nil {
			return strconv.FormatFloat(f, 'f', -1, 64)
		}
		s, _ := m.ToString() // the server's text ("inf", "nan")
		return s
	}
	if err := m.Error(); err != nil {
		return err
	}
	// A verbatim string ("txt:" and the text) or a big number (digits).
	s, _ := m.ToString()
	if len(s) >= 4 && s[3] == ':' {
		return s[4:]
	}
	return s
}

// topValue is value for a whole reply: a reply the adapter cannot
// normalise (a RESP3 map whose keys are not strings, which rueidis does not
// parse) is an error of the reply, not an error value in Val.
func topValue(m *rd.RedisMessage) (any, error) {
	v := value(m)
	if err, ok := v.(error); ok {
		return nil, fmt.Errorf("rueidis: %w", err)
	}
	return v, nil
}

// array normalises the elements of an array reply. An empty array is an
// empty, non-nil slice.
func array(es []rd.RedisMessage) []any {
	out := make([]any, len(es))
	for i := range es {
		out[i] = elem(&es[i])
	}
	return out
}

// elem normalises an element of an array or map reply.
func elem(m *rd.RedisMessage) any {
	if m.IsNil() {
		return nil
	}
	if err := m.Error(); err != nil {
		return replyErr(err)
	}
	return value(m)
}
