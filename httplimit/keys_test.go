package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/quotagate/limiter/httplimit"
)

// fixed is a KeyFunc that always returns s.
func fixed(s string) httplimit.KeyFunc {
	return func(*http.Request) (string, error) { return s, nil }
}

// joinParts is Join(sep, parts...) applied to a request.
func joinParts(t testing.TB, sep string, parts ...string) string {
	t.Helper()
	fs := make([]httplimit.KeyFunc, len(parts))
	for i, p := range parts {
		fs[i] = fixed(p)
	}
	k, err := httplimit.Join(sep, fs...)(httptest.NewRequest(http.MethodGet, "/", nil))
	if err != nil {
		t.Fatalf("Join(%q, %q): %v", sep, parts, err)
	}
	return k
}

// splitJoined decodes a key of Join(sep, ...) back into its parts, reading
// it token by token: "%XX" is an escaped byte, any other byte of sep
// starts a separator (a part never holds one unescaped), anything else is
// a byte of the current part. Being a function, it proves Join injective
// wherever splitJoined(Join(parts)) == parts.
const hexDigits = "0123456789ABCDEF"

func splitJoined(sep, key string) ([]string, error) {
	var parts []string
	var cur []byte
	for i := 0; i < len(key); {
		switch c := key[i]; {
		case c == '%':
			if i+3 > len(key) {
				return nil, fmt.Errorf("truncated escape at %d", i)
			}
			hi, lo := strings.IndexByte(hexDigits, key[i+1]), strings.IndexByte(hexDigits, key[i+2])
			if hi < 0 || lo < 0 {
				return nil, fmt.Errorf("bad escape %q at %d", key[i:i+3], i)
			}
			cur = append(cur, byte(hi<<4|lo))
			i += 3
		case strings.IndexByte(sep, c) >= 0:
			if !strings.HasPrefix(key[i:], sep) {
				return nil, fmt.Errorf("unescaped separator byte %q at %d", c, i)
			}
			parts = append(parts, string(cur))
			cur = nil
			i += len(sep)
		default:
			cur = append(cur, c)
			i++
		}
	}
	return append(parts, string(cur)), nil
}

// TestJoinDistinctTuples: the measured collision of appkey-method keys.
func TestJoinDistinctTuples(t *testing.T) {
	a := joinParts(t, "-", "acme", "order-create")
	b := joinParts(t, "-", "acme-order", "create")
	if a == b {
		t.Fatalf(`Join("-") of ("acme", "order-create") and ("acme-order", "create") both give %q`, a)
	}
}

// TestJoinReadable: parts without '%' or a byte of sep are joined unchanged;
// the others are percent-encoded, byte by byte, in upper case.
func TestJoinReadable(t *testing.T) {
	cases := []struct {
		sep   string
		parts []string
		want  string
	}{
		{"-", []string{"app", "order.create"}, "app-order.create"},
		{"-", []string{"192.0.2.1", "x"}, "192.0.2.1-x"},
		{":", []string{"2001:db8::1", "x"}, "2001%3Adb8%3A%3A1:x"},
		{"-", []string{"acme", "order-create"}, "acme-order%2Dcreate"},
		{"-", []string{"acme-order", "create"}, "acme%2Dorder-create"},
		{"-", []string{"50%", ""}, "50%25-"},
		{"--", []string{"a-", "b"}, "a%2D--b"},
		{"--", []string{"a", "-b"}, "a--%2Db"},
		{"::", []string{"a:b", "c"}, "a%3Ab::c"},
		{"-", []string{"héllo", "wörld"}, "héllo-wörld"},
	}
	for _, c := range cases {
		if got := joinParts(t, c.sep, c.parts...); got != c.want {
			t.Errorf("Join(%q, %q) = %q; want %q", c.sep, c.parts, got, c.want)
		}
	}
}

// joinTable are tuples that a naive join (or a naive escape of the whole
// separator) maps to one key.
var joinTable = []struct {
	sep    string
	tuples [][]string
}{
	{"-", [][]string{
		{"acme", "order-create"}, {"acme-order", "create"}, {"acme-order-create", ""}, {"", "acme-order-create"},
		{"acme%2Dorder", "create"}, {"acme%", "2Dorder-create"}, {"acme%2D", "order-create"},
		{"", ""}, {"-", ""}, {"", "-"}, {"%", ""}, {"%25", ""}, {"%2D", ""},
	}},
	{"--", [][]string{{"a-", "b"}, {"a", "-b"}, {"a--b", ""}, {"a", "--b"}, {"a---", ""}, {"-", "-"}, {"", "---"}}},
	{"::", [][]string{{"a:", ":b"}, {"a", "::b"}, {"a::", "b"}, {"a:::", ""}, {"", ":::b"}}},
	{"ab", [][]string{{"a", "b"}, {"ab", ""}, {"", "ab"}, {"b", "a"}, {"aab", "b"}}},
	{"2", [][]string{{"%", ""}, {"%2", ""}, {"", "5"}, {"%25", ""}, {"2", "2"}, {"", "222"}}},
	{"·", [][]string{{"x·y", "z"}, {"x", "y·z"}, {"\xc2", "\xb7"}, {"¢", "é"}, {"🙂", "·"}}},
	{"é", [][]string{{"é", ""}, {"", "é"}, {"\xc3", "\xa9"}, {"ã", "©"}}},
}

// TestJoinInjective: within each separator, distinct tuples give distinct
// keys, and each key decodes back to its exact parts.
func TestJoinInjective(t *testing.T) {
	for _, c := range joinTable {
		seen := map[string][]string{}
		for _, parts := range c.tuples {
			k := joinParts(t, c.sep, parts...)
			if prev, ok := seen[k]; ok {
				t.Errorf("Join(%q): %q and %q both give %q", c.sep, prev, parts, k)
			}
			seen[k] = parts
			if got, err := splitJoined(c.sep, k); err != nil || !slices.Equal(got, parts) {
				t.Errorf("Join(%q, %q) = %q, decodes to %q, %v", c.sep, parts, k, got, err)
			}
		}
	}
}

// TestJoinBadSeparator: a separator that cannot be told from an escape
// panics when the KeyFunc is made.
func TestJoinBadSeparator(t *testing.T) {
	for _, sep := range []string{"", "%", "-%", "%2D"} {
		func() {
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.Contains(msg, "httplimit.Join") {
					t.Errorf("Join(%q): recovered %v; want a panic naming httplimit.Join", sep, r)
				}
			}()
			httplimit.Join(sep, fixed("a"), fixed("b"))
		}()
	}
}

// FuzzJoin: for any separator Join accepts, distinct tuples of three parts
// give distinct keys (each key decodes back to its exact parts), and parts
// without '%' or a byte of sep are joined unchanged.
func FuzzJoin(f *testing.F) {
	for _, c := range joinTable {
		for _, p := range c.tuples {
			f.Add(c.sep, p[0], p[1], "")
		}
	}
	f.Add("-", "acme", "order-create", "x")
	f.Add("::", "2001:db8::1", "", "::")
	f.Add("--", "a-", "-b", "-")
	f.Add(":", "100%", "%3A", "日本")
	f.Fuzz(func(t *testing.T, sep, a, b, c string) {
		if sep == "" || strings.Contains(sep, "%") {
			t.Skip()
		}
		parts := []string{a, b, c}
		k := joinParts(t, sep, parts...)
		if got, err := splitJoined(sep, k); err != nil || !slices.Equal(got, parts) {
			t.Fatalf("Join(%q, %q) = %q, decodes to %q, %v", sep, parts, k, got, err)
		}
		plain := !strings.Contains(a+b+c, "%")
		for i := 0; i < len(sep); i++ {
			plain = plain && strings.IndexByte(a+b+c, sep[i]) < 0
		}
		if plain && k != a+sep+b+sep+c {
			t.Fatalf("Join(%q, %q) = %q; want the parts unchanged", sep, parts, k)
		}
	})
}
