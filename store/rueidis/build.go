package rueidis

import (
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	rd "github.com/redis/rueidis"

	"github.com/quotagate/limiter/store"
)

// argBuf formats numeric arguments of one call into shared byte chunks, so
// that a call's numbers cost at most one allocation rather than one each.
// Bytes once handed out as a string are never written again: a chunk is only
// appended to, and a full chunk is left alone for a new one.
type argBuf struct {
	b []byte
}

// room makes sure n more bytes fit without moving the chunk.
func (a *argBuf) room(n int) {
	if cap(a.b)-len(a.b) < n {
		a.b = make([]byte, 0, max(64, n))
	}
}

// done returns the bytes appended since start as a string sharing them.
func (a *argBuf) done(start int) string {
	return unsafe.String(unsafe.SliceData(a.b[start:]), len(a.b)-start)
}

func (a *argBuf) int(v int64) string {
	if 0 <= v && v < 100 {
		return strconv.FormatInt(v, 10) // a static string: no allocation
	}
	a.room(20)
	start := len(a.b)
	a.b = strconv.AppendInt(a.b, v, 10)
	return a.done(start)
}

func (a *argBuf) uint(v uint64) string {
	a.room(20)
	start := len(a.b)
	a.b = strconv.AppendUint(a.b, v, 10)
	return a.done(start)
}

func (a *argBuf) float(v float64) string {
	a.room(32)
	start := len(a.b)
	a.b = strconv.AppendFloat(a.b, v, 'f', -1, 64)
	return a.done(start)
}

// str returns an argument as the text Redis receives: strings and []byte as
// they are, integers in base 10, floats in their shortest exact form.
func (a *argBuf) str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return a.int(x)
	case int:
		return a.int(int64(x))
	case []byte:
		return string(x) // copied: the caller may reuse its buffer
	case float64:
		return a.float(x)
	case int32:
		return a.int(int64(x))
	case uint64:
		return a.uint(x)
	case uint32:
		return a.uint(uint64(x))
	case uint:
		return a.uint(uint64(x))
	case float32:
		return a.float(float64(x))
	case bool:
		if x {
			return "1"
		}
		return "0"
	case nil:
		return ""
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(v)
}

// build turns a store.Cmd into a rueidis command. Its first key (found by
// keyIndex) routes it on a Cluster. Nothing marks it retryable or
// read-only, so rueidis never re-sends it after a network error.
func build(b rd.Builder, ab *argBuf, c store.Cmd) rd.Completed {
	ki := keyIndex(c.Name, c.Args)
	a := b.Arbitrary(c.Name)
	for i, v := range c.Args {
		if i == ki {
			a = a.Keys(ab.str(v))
		} else {
			a = a.Args(ab.str(v))
		}
	}
	return a.Build()
}

// keyIndex returns the index in args of the command's first key, or -1 for
// a command without keys. Most commands take a key first; the exceptions
// are listed. Only a Cluster client uses it, to pick the node: the
// contract puts all keys of one call in one slot.
func keyIndex(name string, args []any) int {
	if len(args) == 0 {
		return -1
	}
	up := name
	for i := 0; i < len(name); i++ {
		if c := name[i]; 'a' <= c && c <= 'z' {
			up = strings.ToUpper(name)
			break
		}
	}
	switch up {
	case "EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO":
		return numKeysAt(args, 1)
	case "BLMPOP", "BZMPOP":
		return numKeysAt(args, 1)
	case "LMPOP", "ZMPOP", "SINTERCARD", "ZINTERCARD", "ZUNION", "ZINTER", "ZDIFF":
		return numKeysAt(args, 0)
	case "OBJECT", "MEMORY", "XINFO", "XGROUP", "BITOP":
		if len(args) > 1 {
			return 1
		}
		return -1
	case "SCAN", "SCRIPT", "FUNCTION", "PING", "ECHO", "TIME", "INFO", "DBSIZE",
		"FLUSHDB", "FLUSHALL", "CLIENT", "CONFIG", "RANDOMKEY", "KEYS", "WAIT",
		"WAITAOF", "COMMAND", "CLUSTER", "SELECT", "SWAPDB", "MULTI", "EXEC",
		"DISCARD", "UNWATCH", "LASTSAVE", "SAVE", "BGSAVE", "BGREWRITEAOF",
		"DEBUG", "LATENCY", "SLOWLOG", "ACL", "HELLO", "AUTH", "PUBLISH",
		"SPUBLISH", "ROLE", "READONLY", "READWRITE", "RESET", "LOLWUT", "MODULE":
		return -1
	}
	return 0
}

// numKeysAt reads a numkeys argument at i; the first key follows it.
func numKeysAt(args []any, i int) int {
	if len(args) <= i+1 {
		return -1
	}
	var n int64
	switch x := args[i].(type) {
	case int:
		n = int64(x)
	case int64:
		n = x
	case string:
		n, _ = strconv.ParseInt(x, 10, 64)
	}
	if n <= 0 {
		return -1
	}
	return i + 1
}
