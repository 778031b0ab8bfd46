package conformance_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

func dial(_ context.Context, addr string) (store.Store, func(), error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	return goredis.New(rdb), func() { _ = rdb.Close() }, nil
}

// TestSuiteFailsKnownBad proves that each check can fail: every known-bad
// implementation fails the checks of the properties it violates, and every
// check of the suite fails at least one of them.
func TestSuiteFailsKnownBad(t *testing.T) {
	caught := map[string]bool{}
	for _, ctl := range conformance.KnownBad() {
		label := ctl.Spec.Name
		if ctl.Store != "" {
			label += " on " + ctl.Store
		}
		mk := conformance.Miniredis(conformance.WrapDialer(dial, ctl.Wrap))
		ran := map[string]bool{}
		for _, o := range conformance.RunControl(context.Background(), mk, ctl, nil) {
			ran[o.Check] = true
			if o.Passed || o.Skipped {
				t.Errorf("%s: check %s passed (skipped=%v); the suite must fail it", label, o.Check, o.Skipped)
				continue
			}
			caught[o.Check] = true
			t.Logf("%s: %s failed as it must: %s", label, o.Check, strings.Join(o.Messages, " | "))
		}
		for _, name := range ctl.MustFail {
			if !ran[name] {
				t.Errorf("%s: check %s did not run", label, name)
			}
		}
	}
	var all []string
	for _, ch := range conformance.Checks() {
		all = append(all, ch.Name)
	}
	for _, sc := range conformance.StoreChecks() {
		all = append(all, sc.Name)
	}
	for _, name := range all {
		if !caught[name] {
			t.Errorf("check %s fails no known-bad implementation: it is not shown to be able to fail", name)
		}
	}
	if len(caught) != len(all) || slices.Contains(all, "") {
		t.Errorf("caught %d of %d checks", len(caught), len(all))
	}
}

// TestFixedWindowPassesAll is the positive control beside the negative ones:
// the same runner passes the real strategy and the real store.
func TestFixedWindowPassesAll(t *testing.T) {
	mk := conformance.Miniredis(dial)
	outcomes := conformance.Run(context.Background(), mk, conformance.Strategies(), nil, true)
	if want := len(conformance.Checks())*len(conformance.Strategies()) + len(conformance.StoreChecks()); len(outcomes) != want {
		t.Fatalf("%d outcomes, want %d", len(outcomes), want)
	}
	for _, o := range outcomes {
		if !o.Passed {
			t.Errorf("%s/%s: %v", o.Spec, o.Check, o.Messages)
		}
	}
}
