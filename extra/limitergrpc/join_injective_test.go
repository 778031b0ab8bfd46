package limitergrpc_test

import (
	"context"
	"testing"

	"github.com/quotagate/limiter/extra/limitergrpc"
)

// TestJoinEscapesPercent: Join escapes "%" as well as "|", so ("a|", "b")
// and ("a%7C", "b") are distinct subjects.
func TestJoinEscapesPercent(t *testing.T) {
	key := func(parts ...string) string {
		fs := make([]limitergrpc.KeyFunc, len(parts))
		for i, p := range parts {
			fs[i] = func(context.Context, string) (string, error) { return p, nil }
		}
		k, err := limitergrpc.Join(fs...)(context.Background(), "/m")
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	if a, b := key("a|", "b"), key("a%7C", "b"); a == b {
		t.Errorf("(a|, b) and (a%%7C, b) share the subject %q", a)
	}
	if got := key("a%7C", "b"); got != "a%257C|b" {
		t.Errorf("Join(a%%7C, b) = %q; want a%%257C|b", got)
	}
}
