package store_test

import (
	"testing"

	"github.com/quotagate/limiter/store"
)

// TestKeyIndexNumkeysTypes: Cmd's doc lists []byte among argument
// types, and adapters send a []byte numkeys as its text, but numKeysAt reads
// only int, int64 and string: an EVALSHA whose numkeys is []byte("1") has no
// key, so a Cluster adapter routes it to a random node (MOVED/CROSSSLOT).
func TestKeyIndexNumkeysTypes(t *testing.T) {
	for _, numkeys := range []any{[]byte("1"), float64(1), "1", 1, int64(1)} {
		c := store.Cmd{Name: "EVALSHA", Args: []any{"e0e1f9fabfc9d4800c877a703b823ac0578ff8db", numkeys, "limiter:{u}:60000ms"}}
		if i := store.KeyIndex(c.Name, c.Args); i != 2 {
			t.Errorf("KeyIndex(EVALSHA sha %#v key) = %d, want 2", numkeys, i)
		}
		if k := c.Key(); k != "limiter:{u}:60000ms" {
			t.Errorf("numkeys %#v: Key() = %q, want %q", numkeys, k, "limiter:{u}:60000ms")
		}
	}
	for _, numkeys := range []any{[]byte("0"), float64(0), float64(1.5), "x"} {
		if i := store.KeyIndex("EVALSHA", []any{"sha", numkeys, "k"}); i != -1 {
			t.Errorf("KeyIndex(EVALSHA sha %#v k) = %d, want -1 (no key)", numkeys, i)
		}
	}
}
