// Package sfv is a strict parser of HTTP Structured Field Lists (RFC 9651)
// and a validator of the RateLimit-Policy and RateLimit fields of
// draft-ietf-httpapi-ratelimit-headers-11, written independently of the
// code that emits them so that tests can hold it to the syntax.
//
// It parses what those fields use: Lists of Items whose bare items are
// Integers, Decimals, Strings, Tokens, Byte Sequences or Booleans, with
// Parameters. Inner Lists, Dates and Display Strings are rejected.
package sfv

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Token is a Structured Fields Token.
type Token string

// Param is one parameter of an Item.
type Param struct {
	Key   string // the parameter's key
	Value any    // int64, float64, string, Token, []byte, bool
}

// Item is a bare item with its parameters, in order.
type Item struct {
	Value  any     // the bare item, typed as Param.Value
	Params []Param // in order
}

// Param returns the value of the parameter key and whether it is present.
func (it Item) Param(key string) (any, bool) {
	for _, p := range it.Params {
		if p.Key == key {
			return p.Value, true
		}
	}
	return nil, false
}

type parser struct {
	s string
	i int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("sfv: at byte %d of %q: %s", p.i, p.s, fmt.Sprintf(format, args...))
}

func (p *parser) eof() bool  { return p.i >= len(p.s) }
func (p *parser) peek() byte { return p.s[p.i] }

// ParseList parses a List field value (several field lines joined with
// ", ").
func ParseList(value string) ([]Item, error) {
	p := &parser{s: strings.Trim(value, " ")}
	var out []Item
	if p.eof() {
		return nil, nil
	}
	for {
		if !p.eof() && p.peek() == '(' {
			return nil, p.errorf("inner lists are not supported")
		}
		it, err := p.item()
		if err != nil {
			return nil, err
		}
		out = append(out, it)
		p.ows()
		if p.eof() {
			return out, nil
		}
		if p.peek() != ',' {
			return nil, p.errorf("want ',' between list members")
		}
		p.i++
		p.ows()
		if p.eof() {
			return nil, p.errorf("trailing comma")
		}
	}
}

func (p *parser) ows() {
	for !p.eof() && (p.peek() == ' ' || p.peek() == '\t') {
		p.i++
	}
}

func (p *parser) item() (Item, error) {
	v, err := p.bare()
	if err != nil {
		return Item{}, err
	}
	it := Item{Value: v}
	seen := map[string]bool{}
	for !p.eof() && p.peek() == ';' {
		p.i++
		for !p.eof() && p.peek() == ' ' {
			p.i++
		}
		k, err := p.key()
		if err != nil {
			return Item{}, err
		}
		if seen[k] {
			return Item{}, p.errorf("parameter %q given twice", k)
		}
		seen[k] = true
		var pv any = true
		if !p.eof() && p.peek() == '=' {
			p.i++
			if pv, err = p.bare(); err != nil {
				return Item{}, err
			}
		}
		it.Params = append(it.Params, Param{k, pv})
	}
	return it, nil
}

func (p *parser) key() (string, error) {
	start := p.i
	if p.eof() || !(isLower(p.peek()) || p.peek() == '*') {
		return "", p.errorf("want a key (lowercase letter or '*')")
	}
	for !p.eof() {
		c := p.peek()
		if !(isLower(c) || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
		p.i++
	}
	return p.s[start:p.i], nil
}

func (p *parser) bare() (any, error) {
	if p.eof() {
		return nil, p.errorf("want a bare item")
	}
	switch c := p.peek(); {
	case c == '-' || isDigit(c):
		return p.number()
	case c == '"':
		return p.str()
	case c == ':':
		return p.bytes()
	case c == '?':
		return p.boolean()
	case isAlpha(c) || c == '*':
		return p.token()
	}
	return nil, p.errorf("unexpected %q", p.peek())
}

func (p *parser) number() (any, error) {
	start := p.i
	if p.peek() == '-' {
		p.i++
	}
	digits, dot := 0, -1
	for !p.eof() {
		c := p.peek()
		if isDigit(c) {
			digits++
			p.i++
			continue
		}
		if c == '.' && dot < 0 {
			dot = digits
			p.i++
			continue
		}
		break
	}
	num := p.s[start:p.i]
	if digits == 0 {
		return nil, p.errorf("want digits")
	}
	if dot < 0 {
		if digits > 15 {
			return nil, p.errorf("integer %s has more than 15 digits", num)
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return nil, p.errorf("integer %s: %v", num, err)
		}
		return n, nil
	}
	if dot == 0 || dot > 12 || digits-dot == 0 || digits-dot > 3 {
		return nil, p.errorf("bad decimal %s", num)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return nil, p.errorf("decimal %s: %v", num, err)
	}
	return f, nil
}

func (p *parser) str() (any, error) {
	p.i++ // opening quote
	var b strings.Builder
	for !p.eof() {
		c := p.peek()
		p.i++
		switch {
		case c == '\\':
			if p.eof() || (p.peek() != '"' && p.peek() != '\\') {
				return nil, p.errorf("bad escape in string")
			}
			b.WriteByte(p.peek())
			p.i++
		case c == '"':
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return nil, p.errorf("byte %#x not allowed in a string", c)
		default:
			b.WriteByte(c)
		}
	}
	return nil, p.errorf("unterminated string")
}

func (p *parser) token() (any, error) {
	start := p.i
	p.i++
	for !p.eof() {
		c := p.peek()
		if !(isTchar(c) || c == ':' || c == '/') {
			break
		}
		p.i++
	}
	return Token(p.s[start:p.i]), nil
}

func (p *parser) bytes() (any, error) {
	p.i++
	end := strings.IndexByte(p.s[p.i:], ':')
	if end < 0 {
		return nil, p.errorf("unterminated byte sequence")
	}
	b, err := base64.StdEncoding.DecodeString(p.s[p.i : p.i+end])
	if err != nil {
		return nil, p.errorf("byte sequence: %v", err)
	}
	p.i += end + 1
	return b, nil
}

func (p *parser) boolean() (any, error) {
	p.i++
	if p.eof() || (p.peek() != '0' && p.peek() != '1') {
		return nil, p.errorf("bad boolean")
	}
	v := p.peek() == '1'
	p.i++
	return v, nil
}

func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlpha(c byte) bool { return isLower(c) || (c >= 'A' && c <= 'Z') }
func isTchar(c byte) bool {
	return isAlpha(c) || isDigit(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// Policy is one quota policy item of RateLimit-Policy.
type Policy struct {
	Name string // the item's String
	Q    int64  // the quota
	W    int64  // the window in seconds; 0 when absent
}

// ServiceLimit is one service limit item of RateLimit.
type ServiceLimit struct {
	Name string // the item's String
	R    int64  // the available quota
	T    int64  // the effective window in seconds; -1 when absent
}

// ParsePolicy parses and validates a RateLimit-Policy value against
// draft-ietf-httpapi-ratelimit-headers-11 section 3: a non-empty List of
// Items whose value is a String, with a required non-negative Integer "q",
// an optional positive Integer "w", an optional String "qu" and an
// optional Byte Sequence "pk".
func ParsePolicy(value string) ([]Policy, error) {
	items, err := ParseList(value)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, errors.New("sfv: RateLimit-Policy: empty list")
	}
	out := make([]Policy, len(items))
	for i, it := range items {
		name, ok := it.Value.(string)
		if !ok {
			return nil, fmt.Errorf("sfv: RateLimit-Policy item %d: value %v is a %T, want a String", i, it.Value, it.Value)
		}
		q, err := intParam(it, "q", true, 0)
		if err != nil {
			return nil, fmt.Errorf("sfv: RateLimit-Policy %q: %w", name, err)
		}
		w, err := intParam(it, "w", false, 1)
		if err != nil {
			return nil, fmt.Errorf("sfv: RateLimit-Policy %q: %w", name, err)
		}
		if v, ok := it.Param("qu"); ok {
			if _, ok := v.(string); !ok {
				return nil, fmt.Errorf("sfv: RateLimit-Policy %q: qu must be a String", name)
			}
		}
		if v, ok := it.Param("pk"); ok {
			if _, ok := v.([]byte); !ok {
				return nil, fmt.Errorf("sfv: RateLimit-Policy %q: pk must be a Byte Sequence", name)
			}
		}
		out[i] = Policy{Name: name, Q: q, W: max(w, 0)}
	}
	return out, nil
}

// ParseRateLimit parses and validates a RateLimit value against
// draft-ietf-httpapi-ratelimit-headers-11 section 4: a List of Items whose
// value is a String, with a required non-negative Integer "r", an optional
// non-negative Integer "t" and an optional Byte Sequence "pk".
func ParseRateLimit(value string) ([]ServiceLimit, error) {
	items, err := ParseList(value)
	if err != nil {
		return nil, err
	}
	out := make([]ServiceLimit, len(items))
	for i, it := range items {
		name, ok := it.Value.(string)
		if !ok {
			return nil, fmt.Errorf("sfv: RateLimit item %d: value %v is a %T, want a String", i, it.Value, it.Value)
		}
		r, err := intParam(it, "r", true, 0)
		if err != nil {
			return nil, fmt.Errorf("sfv: RateLimit %q: %w", name, err)
		}
		t, err := intParam(it, "t", false, 0)
		if err != nil {
			return nil, fmt.Errorf("sfv: RateLimit %q: %w", name, err)
		}
		if v, ok := it.Param("pk"); ok {
			if _, ok := v.([]byte); !ok {
				return nil, fmt.Errorf("sfv: RateLimit %q: pk must be a Byte Sequence", name)
			}
		}
		out[i] = ServiceLimit{Name: name, R: r, T: t}
	}
	return out, nil
}

// intParam returns the Integer parameter key, at least lo; -1 when it is
// absent and not required.
func intParam(it Item, key string, required bool, lo int64) (int64, error) {
	v, ok := it.Param(key)
	if !ok {
		if required {
			return 0, fmt.Errorf("parameter %q is missing", key)
		}
		return -1, nil
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("parameter %q = %v is a %T, want an Integer", key, v, v)
	}
	if n < lo {
		return 0, fmt.Errorf("parameter %q = %d, want at least %d", key, n, lo)
	}
	return n, nil
}
