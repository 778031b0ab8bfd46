package conformance_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/conformance/knownbad"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

func dialer(wrap func(store.Store) store.Store) conformance.Dialer {
	return func(_ context.Context, addr string) (store.Store, func(), error) {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		return wrap(goredis.New(rdb)), func() { _ = rdb.Close() }, nil
	}
}

func asIs(st store.Store) store.Store { return st }

// claims returns spec with s in place of its strategy: a known-bad strategy
// claims FixedWindow's guarantees, and the suite must refute the claim.
func claims(name string, s limiter.Strategy) conformance.Spec {
	spec := conformance.FixedWindow()
	spec.Name, spec.Strategy, spec.Commit = name, s, ""
	return spec
}

// control is a known-bad implementation and the checks that must fail it.
type control struct {
	spec  conformance.Spec
	wrap  func(store.Store) store.Store
	fails []string // check names, store checks included
}

func controls() []control {
	return []control{
		{claims("GetThenIncr", knownbad.GetThenIncr{}), asIs,
			[]string{"exact-admission", "weighted-costs", "forced-leak", "self-repair", "bounded-ttls"}},
		{claims("IncrThenExpire", knownbad.IncrThenExpire{}), asIs,
			[]string{"exact-admission", "hostile-costs", "multi-rule-all-or-nothing", "window-never-slides"}},
		{claims("RuleByRule", knownbad.RuleByRule{}), asIs,
			[]string{"hostile-costs", "multi-rule-all-or-nothing", "short-and-long-windows"}},
		{conformance.FixedWindow(), knownbad.NoScriptFallback,
			[]string{"noscript-invisible"}},
		{conformance.FixedWindow(), knownbad.Retrying,
			[]string{"lost-reply-counted-once"}},
		{conformance.FixedWindow(), knownbad.Unmapped,
			[]string{"replies-normalised", "scripts-and-noscript"}},
	}
}

// TestSuiteFailsKnownBad proves that each check can fail: every known-bad
// implementation fails the checks of the properties it violates, and every
// check of the suite fails at least one of them.
func TestSuiteFailsKnownBad(t *testing.T) {
	caught := map[string]bool{}
	for _, ctl := range controls() {
		mk := conformance.Miniredis(dialer(ctl.wrap))
		var checks []conformance.Check
		storeChecks := false
		for _, name := range ctl.fails {
			if ch, ok := conformance.CheckByName(name); ok {
				checks = append(checks, ch)
			} else {
				storeChecks = true
			}
		}
		if len(checks) == 0 {
			checks = []conformance.Check{} // store checks only
		}
		outcomes := conformance.Run(context.Background(), mk, []conformance.Spec{ctl.spec}, checks, storeChecks)
		for _, o := range outcomes {
			want := false
			for _, name := range ctl.fails {
				want = want || name == o.Check
			}
			if !want {
				continue
			}
			label := ctl.spec.Name + " on " + storeName(ctl.wrap)
			if o.Passed || o.Skipped {
				t.Errorf("%s: check %s passed (skipped=%v); the suite must fail it", label, o.Check, o.Skipped)
				continue
			}
			caught[o.Check] = true
			t.Logf("%s: %s failed as it must: %s", label, o.Check, strings.Join(o.Messages, " | "))
		}
	}
	for _, ch := range conformance.Checks() {
		if !caught[ch.Name] {
			t.Errorf("check %s fails no known-bad implementation: it is not shown to be able to fail", ch.Name)
		}
	}
	for _, sc := range conformance.StoreChecks() {
		if !caught[sc.Name] {
			t.Errorf("store check %s fails no known-bad implementation", sc.Name)
		}
	}
}

func storeName(wrap func(store.Store) store.Store) string {
	st := wrap(nil)
	if st == nil {
		return "goredis"
	}
	return strings.TrimPrefix(strings.TrimPrefix(fmtType(st), "*"), "knownbad.")
}

// TestFixedWindowPassesAll is the positive control beside the negative ones:
// the same runner passes the real strategy.
func TestFixedWindowPassesAll(t *testing.T) {
	mk := conformance.Miniredis(dialer(asIs))
	for _, o := range conformance.Run(context.Background(), mk, conformance.Strategies(), nil, true) {
		if !o.Passed {
			t.Errorf("%s/%s: %v", o.Spec, o.Check, o.Messages)
		}
	}
}

func fmtType(v any) string { return strings.TrimSpace(strings.Split(fmt.Sprintf("%T", v), ".")[0]) }
