package store

import (
	"math"
	"strconv"
	"strings"
)

// Key returns the command's first key, or "" for a command without keys
// (or whose first key is not text). See KeyIndex.
func (c Cmd) Key() string {
	i := KeyIndex(c.Name, c.Args)
	if i < 0 {
		return ""
	}
	k, _ := argText(c.Args[i])
	return k
}

// argText returns an argument that is text (a string or []byte) as a
// string.
func argText(a any) (string, bool) {
	switch t := a.(type) {
	case string:
		return t, true
	case []byte:
		return string(t), true
	}
	return "", false
}

// KeyIndex returns the index in args of the command name's first key, or
// -1 for a command without keys. Most commands take a key first; the
// exceptions are listed. A Cluster adapter uses it to pick a command's
// node: the contract puts all keys of one command in one slot.
func KeyIndex(name string, args []any) int {
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
	case []byte:
		n, _ = strconv.ParseInt(string(x), 10, 64)
	case float64:
		// as the adapters write it, when it is a whole number
		if x == math.Trunc(x) && x >= 1 && x <= 1<<53 {
			n = int64(x)
		}
	}
	if n <= 0 {
		return -1
	}
	return i + 1
}

// Group groups the indexes of cmds by key(cmd), the groups in the order of
// their first command and each in the order of cmds: a Cluster adapter's
// Batch sends one pipeline per group (per node, or per slot).
func Group(cmds []Cmd, key func(Cmd) string) [][]int {
	at := map[string]int{}
	var groups [][]int
	for i, c := range cmds {
		k := key(c)
		g, ok := at[k]
		if !ok {
			g = len(groups)
			at[k] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// IsTx reports cmds of the form MULTI, commands, EXEC, with no other
// transaction command (MULTI, EXEC, DISCARD, WATCH, UNWATCH) among the
// commands: one transaction, which an adapter keeps on one connection and,
// on a Cluster, redirects as a whole.
func IsTx(cmds []Cmd) bool {
	n := len(cmds)
	if n < 3 || !strings.EqualFold(cmds[0].Name, "MULTI") || !strings.EqualFold(cmds[n-1].Name, "EXEC") {
		return false
	}
	for _, c := range cmds[1 : n-1] {
		switch strings.ToUpper(c.Name) {
		case "MULTI", "EXEC", "DISCARD", "WATCH", "UNWATCH":
			return false
		}
	}
	return true
}

// KeySlot is Redis Cluster's HASH_SLOT of key: CRC16-XMODEM of the key's
// hash tag (the text between its first "{" and the next "}", when not
// empty) or else of the whole key, mod 16384. Keys of one slot are served
// by one node.
func KeySlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}
