package strategy

import (
	"errors"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// TestParseCounter: counters are read as Redis's INCRBY reads them, and no
// more loosely (strconv.ParseInt takes "+3" and "007", which INCRBY then
// refuses after other limits were written).
func TestParseCounter(t *testing.T) {
	for _, ok := range []struct {
		in   any
		want int64
	}{{"0", 0}, {"7", 7}, {"1234567890123456", 1234567890123456}, {int64(3), 3}} {
		if n, err := parseCounter(ok.in); err != nil || n != ok.want {
			t.Errorf("parseCounter(%q) = %d, %v; want %d", ok.in, n, err, ok.want)
		}
	}
	for _, bad := range []any{"", "1.5", " 3", "3 ", "0x2", "1e0", "+3", "-3", "007", "00", "-0", "12345678901234567", "abc", int64(-1), []any{}} {
		if n, err := parseCounter(bad); !errors.Is(err, limiter.ErrCorruptCounter) {
			t.Errorf("parseCounter(%#v) = %d, %v; want ErrCorruptCounter", bad, n, err)
		}
	}
	if _, err := parseCounter(nil); !errors.Is(err, store.ErrNil) {
		t.Errorf("parseCounter(nil) = %v; want store.ErrNil", err)
	}
}
