package rules_test

import (
	"context"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/rules"
)

// TestDefaultAllowNZeroReads: AllowN with n == 0 reads the state
// without writing; for a subject the Default decides alone (allow, deny)
// that is the Default's answer, not ErrInvalidCost, as for a subject with
// rules of its own.
func TestDefaultAllowNZeroReads(t *testing.T) {
	ctx := context.Background()
	m := redistest.NewMini(t)
	b := newBackend(t, m.Addr(), m)
	for _, tc := range []struct {
		def   rules.Default
		allow bool
	}{{rules.AllowUnknown(), true}, {rules.DenyUnknown(), false}} {
		set := &rules.Set{
			Subjects: map[string][]limiter.Limit{"known": {limiter.PerSecond(1).Named("qps")}},
			Default:  tc.def,
		}
		rl, err := rules.New(ctx, newLimiter(t, b.st), rules.Static(set))
		if err != nil {
			t.Fatal(err)
		}
		d, err := rl.AllowN(ctx, "stranger", 0)
		if err != nil {
			t.Fatalf("default %v: AllowN(stranger, 0): %v; want no error", tc.def.Action, err)
		}
		if d.Allowed != tc.allow || !d.Default || d.Subject != "stranger" {
			t.Errorf("default %v: AllowN(stranger, 0) = %+v; want Allowed %v, Default", tc.def.Action, d, tc.allow)
		}
		if !tc.allow && d.RetryAfter != -1 {
			t.Errorf("default deny: RetryAfter %v; want -1", d.RetryAfter)
		}
		// the same read for a subject with rules of its own is no error either
		if _, err := rl.AllowN(ctx, "known", 0); err != nil {
			t.Errorf("AllowN(known, 0): %v", err)
		}
	}
}
