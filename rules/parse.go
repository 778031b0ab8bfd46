package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/quotagate/limiter"
)

// The configuration file format, in YAML (JSON has the same shape):
//
//	default: deny            # deny | allow | a list of rules
//	fail_mode: closed        # optional: error | open | closed
//	subjects:
//	  app-1-order.create:
//	    - {name: qps, rate: 10, period: 1s}
//	    - {name: qpd, rate: 1000, period: 1d}
//
// A rule has a rate (a positive integer), a period (a duration string, or
// whole days "1d"), an optional name (its counter's name: give every rule
// one) and an optional burst (for strategies that use it).

// ParseJSON parses a rule set in JSON and validates it. Errors are
// *ConfigError naming the field.
func ParseJSON(data []byte) (*Set, error) {
	v, err := decodeJSON(data)
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	return setFromTree(v)
}

// ParseYAML parses a rule set in YAML (one document; empty ones after it
// are ignored, a second rule set is refused) and validates it. Errors are
// *ConfigError naming the field.
func ParseYAML(data []byte) (*Set, error) {
	var v any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		return nil, &ConfigError{Err: err}
	} else if err == nil {
		decimalInts(&doc)
		if err := doc.Decode(&v); err != nil {
			return nil, &ConfigError{Err: err}
		}
	}
	// A second document (two files run together) would otherwise be
	// dropped without a word, as JSON's data after the value is refused;
	// empty ones (a trailing "---") are harmless.
	for {
		var more any
		err := dec.Decode(&more)
		if err == io.EOF {
			return setFromTree(v)
		}
		if err == nil && more != nil {
			err = errors.New("a second YAML document after the first (---): one document holds the rule set")
		}
		if err != nil {
			return nil, &ConfigError{Err: err}
		}
	}
}

// decimalInts makes the plain integers of n written with a leading zero
// decimal, as YAML 1.2 and JSON's readers read them: yaml.v3 keeps YAML
// 1.1's octal, so that "rate: 0100" would be 64 (and "0900", not octal,
// 900), "0_100" too (YAML 1.1's digit separators, which yaml.v3 reads). 0o100
// and 0x40 still say octal and hexadecimal.
func decimalInts(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && n.Style == 0 && n.ShortTag() == "!!int" {
		sign, digits := "", n.Value
		if digits != "" && (digits[0] == '-' || digits[0] == '+') {
			sign, digits = digits[:1], digits[1:]
		}
		if len(digits) > 1 && digits[0] == '0' && strings.Trim(digits, "0123456789_") == "" {
			n.Value = sign + strings.TrimLeft(strings.ReplaceAll(digits, "_", ""), "0")
			if n.Value == sign {
				n.Value = "0"
			}
		}
	}
	for _, c := range n.Content {
		decimalInts(c)
	}
}

// ParseRules parses one list of rules in JSON, the value of a field of a
// rule hash: [{"name":"qps","rate":10,"period":"1s"}, ...]. It checks each
// rule but not the list as a whole (Set.Validate does).
func ParseRules(data []byte) ([]limiter.Limit, error) {
	v, err := decodeJSON(data)
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	return rulesFromTree("", v)
}

// FormatRules formats limits as ParseRules reads them: the value of a field
// of a rule hash.
func FormatRules(limits []limiter.Limit) ([]byte, error) {
	type rule struct {
		Name   string `json:"name,omitempty"`
		Rate   int64  `json:"rate"`
		Period string `json:"period"`
		Burst  int64  `json:"burst,omitempty"`
	}
	out := make([]rule, len(limits))
	for i, l := range limits {
		out[i] = rule{l.Name, l.Rate, FormatPeriod(l.Period), l.Burst}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	return b, nil
}

func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the JSON value")
	}
	if err := duplicateKeys(data); err != nil {
		return nil, err
	}
	return v, nil
}

// duplicateKeys reports an object of a valid JSON document that holds a
// key twice (encoding/json keeps the last silently: a subject or a field
// written twice would lose the first without a word; YAML refuses them).
func duplicateKeys(data []byte) error {
	type frame struct {
		obj, wantKey bool
		keys         map[string]bool
	}
	var stack []*frame
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				stack = append(stack, &frame{obj: d == '{', wantKey: d == '{', keys: map[string]bool{}})
				continue
			}
			stack = stack[:len(stack)-1]
			if n := len(stack); n > 0 && stack[n-1].obj {
				stack[n-1].wantKey = true // the object or array was a value
			}
			continue
		}
		n := len(stack)
		if n == 0 || !stack[n-1].obj {
			continue
		}
		f := stack[n-1]
		if !f.wantKey {
			f.wantKey = true // a scalar value
			continue
		}
		k, _ := tok.(string)
		if f.keys[k] {
			return fmt.Errorf("key %q appears twice in one object", k)
		}
		f.keys[k], f.wantKey = true, false
	}
}

// setFromTree builds a Set from a decoded document.
func setFromTree(v any) (*Set, error) {
	top, err := object("", v)
	if err != nil {
		return nil, err
	}
	s := &Set{Subjects: map[string][]limiter.Limit{}}
	for _, k := range sortedKeys(top) {
		val := top[k]
		switch k {
		case "default":
			if s.Default, err = defaultFromTree(val); err != nil {
				return nil, err
			}
		case "fail_mode":
			str, ok := val.(string)
			m, known := failModes[str]
			if !ok || !known {
				return nil, &ConfigError{Field: "fail_mode", Err: fmt.Errorf("%s: want \"error\", \"open\" or \"closed\"", describe(val))}
			}
			s.FailMode = &m
		case "subjects":
			subjects, err := object("subjects", val)
			if err != nil {
				return nil, err
			}
			for _, subj := range sortedKeys(subjects) {
				ls, err := rulesFromTree("subjects["+strconv.Quote(subj)+"]", subjects[subj])
				if err != nil {
					return nil, err
				}
				s.Subjects[subj] = ls
			}
		default:
			return nil, &ConfigError{Field: k, Err: errors.New("unknown field (want default, fail_mode, subjects)")}
		}
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

var failModes = map[string]limiter.FailMode{
	"error":  limiter.FailError,
	"open":   limiter.FailOpen,
	"closed": limiter.FailClosed,
}

func defaultFromTree(v any) (Default, error) {
	switch x := v.(type) {
	case string:
		switch x {
		case "deny":
			return DenyUnknown(), nil
		case "allow":
			return AllowUnknown(), nil
		}
	case []any:
		ls, err := rulesFromTree("default", x)
		if err != nil {
			return Default{}, err
		}
		return LimitUnknown(ls...), nil
	}
	return Default{}, &ConfigError{Field: "default", Err: fmt.Errorf("%s: want \"deny\", \"allow\" or a list of rules", describe(v))}
}

// rulesFromTree reads a list of rules at path.
func rulesFromTree(path string, v any) ([]limiter.Limit, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, &ConfigError{Field: path, Err: fmt.Errorf("%s: want a list of rules", describe(v))}
	}
	out := make([]limiter.Limit, len(list))
	for i, e := range list {
		at := path + "[" + strconv.Itoa(i) + "]"
		obj, err := object(at, e)
		if err != nil {
			return nil, err
		}
		var l limiter.Limit
		seen := map[string]bool{}
		for _, k := range sortedKeys(obj) {
			val := obj[k]
			field := at + "." + k
			seen[k] = true
			switch k {
			case "name":
				s, ok := val.(string)
				if !ok {
					return nil, &ConfigError{Field: field, Err: fmt.Errorf("%s: want a string", describe(val))}
				}
				l.Name = s
			case "rate", "burst":
				n, err := integer(val)
				if err != nil {
					return nil, &ConfigError{Field: field, Err: err}
				}
				if k == "rate" {
					l.Rate = n
				} else {
					l.Burst = n
				}
			case "period":
				s, ok := val.(string)
				if !ok {
					return nil, &ConfigError{Field: field, Err: fmt.Errorf("%s: want a duration string such as \"1s\" or \"1d\"", describe(val))}
				}
				d, err := ParsePeriod(s)
				if err != nil {
					return nil, &ConfigError{Field: field, Err: err}
				}
				l.Period = d
			default:
				return nil, &ConfigError{Field: field, Err: errors.New("unknown field (want name, rate, period, burst)")}
			}
		}
		for _, req := range []string{"rate", "period"} {
			if !seen[req] {
				return nil, &ConfigError{Field: at + "." + req, Err: errors.New("missing")}
			}
		}
		if field, err := checkLimit(l); err != nil {
			return nil, &ConfigError{Field: at + field, Err: err}
		}
		out[i] = l
	}
	return out, nil
}

// object returns v as a map with string keys.
func object(path string, v any) (map[string]any, error) {
	switch x := v.(type) {
	case map[string]any:
		return x, nil
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			s, ok := k.(string)
			if !ok {
				return nil, &ConfigError{Field: path, Err: fmt.Errorf("key %v is not a string", k)}
			}
			m[s] = e
		}
		return m, nil
	}
	return nil, &ConfigError{Field: path, Err: fmt.Errorf("%s: want an object", describe(v))}
}

// integer reads a whole number from JSON (json.Number) or YAML (int,
// float64).
func integer(v any) (int64, error) {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n, nil
		}
		// a whole number written with a fraction or an exponent (100.0,
		// 1e3), as YAML's reader takes it
		if f, err := x.Float64(); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return int64(f), nil
		}
	case int:
		return int64(x), nil
	case int64:
		return x, nil
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), nil
		}
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), nil
		}
	}
	return 0, fmt.Errorf("%s: want a whole number", describe(v))
}

// describe names a decoded value for an error message.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	case json.Number:
		return x.String()
	case []any:
		return "a list"
	case map[string]any, map[any]any:
		return "an object"
	}
	return fmt.Sprint(v)
}

func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
