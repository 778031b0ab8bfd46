package store_test

import (
	"testing"

	"github.com/quotagate/limiter/store"
)

// TestInt64Base10: a string reply is a base-10 integer, as Redis writes
// one: leading zeros are decimal, and Go's prefixes and underscores are
// not integers.
func TestInt64Base10(t *testing.T) {
	if n, err := store.Int64("010"); err != nil || n != 10 {
		t.Errorf("Int64(\"010\") = %d, %v; want 10", n, err)
	}
	for _, s := range []string{"0x10", "0b1", "0o7", "1_000"} {
		if n, err := store.Int64(s); err == nil {
			t.Errorf("Int64(%q) = %d; want an error", s, n)
		}
	}
}
