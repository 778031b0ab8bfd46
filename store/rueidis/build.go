package rueidis

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	rd "github.com/redis/rueidis"

	"github.com/quotagate/limiter/internal/argcache"

	"github.com/quotagate/limiter/store"
)

// argText returns an argument as the text Redis receives: strings and
// []byte as they are, integers in base 10, floats in their shortest exact
// form.
func argText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x) // copied: the caller may reuse its buffer
	case nil:
		return ""
	case bool:
		if x {
			return "1"
		}
		return "0"
	case fmt.Stringer:
		return x.String()
	}
	if b, ok := appendNumber(nil, v); ok {
		return string(b)
	}
	return fmt.Sprint(v)
}

// appendNumber appends a numeric argument's text to b.
func appendNumber(b []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case int64:
		return strconv.AppendInt(b, x, 10), true
	case int:
		return strconv.AppendInt(b, int64(x), 10), true
	case int32:
		return strconv.AppendInt(b, int64(x), 10), true
	case uint64:
		return strconv.AppendUint(b, x, 10), true
	case uint32:
		return strconv.AppendUint(b, uint64(x), 10), true
	case uint:
		return strconv.AppendUint(b, uint64(x), 10), true
	case float64:
		return strconv.AppendFloat(b, x, 'f', -1, 64), true
	case float32:
		return strconv.AppendFloat(b, float64(x), 'f', -1, 32), true
	}
	return b, false
}

// argTexts is argText for the arguments of one call, in out. The numbers
// are formatted into one buffer that becomes one string, sliced per
// argument: one allocation for all of them instead of one each.
func argTexts(args []any, out []string) []string {
	type span struct{ i, from, to int }
	var stack [128]byte
	var spans [16]span
	buf, sp := stack[:0], spans[:0]
	for i, v := range args {
		if t, ok := smallText(v); ok {
			out[i] = t
			continue
		}
		from := len(buf)
		var ok bool
		if buf, ok = appendNumber(buf, v); ok {
			sp = append(sp, span{i, from, len(buf)})
			continue
		}
		out[i] = argText(v)
	}
	if len(sp) > 0 {
		all := string(buf)
		for _, x := range sp {
			out[x.i] = all[x.from:x.to]
		}
	}
	return out
}

// intTexts is argTexts for integer arguments: 0..99 from the runtime's
// table, others from tc when it holds them, the rest formatted into one
// string, sliced per argument, and remembered in tc (when not nil).
func intTexts(tc *argcache.Cache[string], args []int64, out []string) []string {
	var stack [64]byte // a few large numbers; more spill to the heap
	buf := stack[:0]
	for i, v := range args {
		if 0 <= v && v < 100 {
			out[i] = strconv.FormatInt(v, 10)
			continue
		}
		if t, ok := tc.Get(v); ok {
			out[i] = t
			continue
		}
		out[i] = "" // formatted below
		buf = strconv.AppendInt(buf, v, 10)
	}
	if len(buf) == 0 {
		return out
	}
	all := string(buf)
	for i, v := range args {
		if out[i] == "" {
			n := decLen(v)
			out[i], all = all[:n], all[n:]
			tc.Put(v, out[i])
		}
	}
	return out
}

// decLen returns the length of v in base 10, with its sign.
func decLen(v int64) int {
	n := 1
	u := uint64(v)
	if v < 0 {
		n, u = 2, uint64(-(v+1))+1 // MinInt64 has no positive int64
	}
	for ; u >= 10; u /= 10 {
		n++
	}
	return n
}

// smallText returns the text of an integer argument from -1 to 99 without
// allocating (strconv.FormatInt's table, and "-1", which a many-request
// call sends for each request whose arguments are the previous one's), and
// false for any other argument.
func smallText(v any) (string, bool) {
	var n int64
	switch x := v.(type) {
	case int64:
		n = x
	case int:
		n = int64(x)
	default:
		return "", false
	}
	switch {
	case n == -1:
		return "-1", true
	case 0 <= n && n < 100:
		return strconv.FormatInt(n, 10), true
	}
	return "", false
}

// checkCmd refuses, before anything is sent, a command that rueidis's
// builder would panic on.
func checkCmd(c store.Cmd) error {
	if c.Name == "" {
		return errors.New("rueidis: a command without a name")
	}
	if strings.HasSuffix(strings.ToUpper(c.Name), "SUBSCRIBE") {
		return fmt.Errorf("rueidis: %s is not a request-reply command: %w", c.Name, store.ErrNotSupported)
	}
	return nil
}

// textBufs holds the texts of long commands' arguments while build runs.
var textBufs = sync.Pool{New: func() any { return new([]string) }}

// maxPooledTexts bounds the buffers that go back to textBufs.
const maxPooledTexts = 4096

// build turns a store.Cmd into a rueidis command and reports whether it
// has a key. Its first key (found by store.KeyIndex) routes it on a Cluster.
// Nothing marks it retryable or read-only, so rueidis never re-sends it
// after a network error.
func build(b rd.Builder, c store.Cmd) (rd.Completed, bool) {
	var stack [16]string
	if len(c.Args) > len(stack) {
		return buildLong(b, c)
	}
	return buildWith(b, c, stack[:len(c.Args)])
}

// buildLong is build for a command of many arguments (a many-request
// script call), their texts in a buffer from a pool: rueidis copies them
// into the command.
func buildLong(b rd.Builder, c store.Cmd) (rd.Completed, bool) {
	p := textBufs.Get().(*[]string)
	texts := slices.Grow((*p)[:0], len(c.Args))[:len(c.Args)]
	cmd, hasKey := buildWith(b, c, texts)
	clear(texts)
	if cap(texts) <= maxPooledTexts {
		*p = texts[:0]
		textBufs.Put(p)
	}
	return cmd, hasKey
}

// buildWith is build with texts (one per argument) to format the
// arguments into.
func buildWith(b rd.Builder, c store.Cmd, texts []string) (rd.Completed, bool) {
	ki := store.KeyIndex(c.Name, c.Args)
	// The numbers' text in one string (argTexts): a many-request script
	// call carries a few for each of its requests.
	texts = argTexts(c.Args, texts)
	a := b.Arbitrary(c.Name)
	for i, t := range texts {
		if i == ki {
			a = a.Keys(t)
		} else {
			a = a.Args(t)
		}
	}
	return a.Build(), ki >= 0
}
