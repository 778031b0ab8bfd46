package limiter_test

import (
	"context"
	"testing"

	"github.com/quotagate/limiter"
)

// TestReturnLeasesOfACopyWithAnotherPrefix: a copy made with With(WithPrefix(...))
// (what httplimit.NewFixed does for its scope) shares the quota lease
// table of the Limiter it was made from. ReturnLeases walks every lease in
// the table but gives each one back to the key built with the *caller's*
// prefix (giveBack uses l.keys, not id.prefix): units leased from
// "api:login:{u}" are taken off "api:{u}", which never counted them.
func TestReturnLeasesOfACopyWithAnotherPrefix(t *testing.T) {
	m, st := newMini(t)
	ctx := context.Background()
	l := limiter.PerHour(10)
	base := newLimiter(t, st, limiter.WithPrefix("api"), limiter.WithQuotaLease(5))
	scoped, err := base.With(limiter.WithPrefix("api:login"))
	if err != nil {
		t.Fatal(err)
	}
	other := newLimiter(t, st, limiter.WithPrefix("api")) // another process on the base counters, no leases

	// The base counter of subject u is full: 10 of 10.
	for i := range 10 {
		if r, err := other.Allow(ctx, "u", l); err != nil || !r.Allowed {
			t.Fatalf("base call %d: %+v, %v", i, r, err)
		}
	}
	// The scoped copy leases 5 units of api:login:{u} (admits 1, holds 4).
	if r, err := scoped.Allow(ctx, "u", l); err != nil || !r.Allowed || !r.Leased {
		t.Fatalf("scoped call: %+v, %v; want a lease", r, err)
	}
	baseKey, _ := limiter.Key("api", "u", l)
	scopedKey, _ := limiter.Key("api:login", "u", l)

	n, err := base.ReturnLeases(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	bv, _ := m.Get(baseKey)
	sv, _ := m.Get(scopedKey)
	t.Logf("ReturnLeases = %d; %s = %s, %s = %s", n, baseKey, bv, scopedKey, sv)

	admitted := 0
	for range 10 {
		r, err := other.Allow(ctx, "u", l)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			admitted++
		}
	}
	if admitted != 0 || bv != "10" {
		t.Errorf("base counter of u was full (10 of 10) and never leased, but after ReturnLeases it reads %s and admits %d more: %d admitted in one window of 10/h", bv, admitted, 10+admitted)
	}
	if n > 0 && sv != "1" {
		t.Errorf("ReturnLeases reported %d units given back, but the scoped counter they were counted in still reads %s (want 1)", n, sv)
	}
}
