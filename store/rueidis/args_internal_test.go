package rueidis

import (
	"math"
	"reflect"
	"testing"
)

func TestArgTexts(t *testing.T) {
	args := []any{int64(1), "0", int64(1 << 40), 1000, -5, 2.5, []byte("b"), uint(7), true, nil, int64(math.MinInt64)}
	want := []string{"1", "0", "1099511627776", "1000", "-5", "2.5", "b", "7", "1", "", "-9223372036854775808"}
	got := argTexts(args, make([]string, len(args)))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("argTexts = %q, want %q", got, want)
	}
	for i, a := range args {
		if s := argText(a); s != want[i] {
			t.Errorf("argText(%#v) = %q, want %q", a, s, want[i])
		}
	}
}
