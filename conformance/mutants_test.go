package conformance_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// Mutants of correct strategies, each with one plausible mistake, and the
// check of the suite that must fail it: the proof that the check's
// assertions on what a decision reports (Remaining, ResetAfter,
// RetryAfter, a Peek's verdict, a Reset's reach, a repaired TTL on every
// limit's key) can fail, beside the known-bad controls (KnownBad), which
// prove that each check can. Uses dial from controls_test.go.

// luaWindow is FixedWindow's general path alone (fast paths cut), run
// through a small Go binding: the base of the Lua mutants below.
type luaWindow struct{ s *store.Script }

func (w luaWindow) args(req limiter.Request) []any {
	args := []any{req.Cost, 0}
	if req.DryRun {
		args[1] = 1
	}
	for _, l := range req.Limits {
		args = append(args, l.Rate, l.Period.Milliseconds())
	}
	return args
}

func (w luaWindow) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	v, err := w.s.Run(ctx, st, req.Keys, w.args(req))
	return bindReply(req, v, err, 0)
}

// bindReply reads the general path's reply; extra is added to every
// Remaining (0 but in the AllowMany mutant).
func bindReply(req limiter.Request, v any, err error, extra int64) (limiter.Result, error) {
	if err != nil {
		msg := err.Error()
		if strings.Contains(msg, "WRONGTYPE") || strings.Contains(msg, "not an integer") || strings.Contains(msg, "would overflow") || strings.Contains(msg, "limiter corrupt counter") {
			return limiter.Result{}, fmt.Errorf("%w: %w", limiter.ErrCorruptCounter, err)
		}
		return limiter.Result{}, err
	}
	nums, err := store.Int64s(v)
	if err != nil {
		return limiter.Result{}, err
	}
	n := len(req.Limits)
	if len(nums) != 1+3*n {
		return limiter.Result{}, fmt.Errorf("bad reply %v", nums)
	}
	var b limiter.Binder
	for i := 0; i < n; i++ {
		retry := time.Duration(nums[3+3*i]) * time.Millisecond
		if nums[3+3*i] < 0 {
			retry = -1
		}
		b.Add(i, nums[1+3*i]+extra, time.Duration(nums[2+3*i])*time.Millisecond, retry)
	}
	return b.Result(nums[0] == 1), nil
}

// scriptWindow is luaWindow as a limiter.ScriptStrategy, so that AllowMany
// batches its calls; batchExtra is added to Remaining in AllowMany's
// results only (BatchResult), the mutant.
type scriptWindow struct {
	luaWindow
	batchExtra int64
}

func (w scriptWindow) BatchScript(req limiter.Request) (*store.Script, []any, error) {
	return w.s, w.args(req), nil
}

func (w scriptWindow) BatchResult(req limiter.Request, r store.Reply) (limiter.Result, error) {
	return bindReply(req, r.Val, r.Err, w.batchExtra)
}

// generalLua is strategy/lua/fixed_window.lua with its two fast paths cut:
// every call takes the general path (read every counter, then write).
func generalLua(t testing.TB) string {
	return cutLua(t, "fixed_window.lua", "-- The common call, one limit", "local counts, ttls, exists, repair = {}, {}, {}, {}")
}

// cutLua is the script strategy/lua/name without its text from the first
// occurrence of from up to (not including) the first of to.
func cutLua(t testing.TB, name, from, to string) string {
	b, err := os.ReadFile("../strategy/lua/" + name)
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	i := strings.Index(src, from)
	j := strings.Index(src, to)
	if i < 0 || j < i {
		t.Fatalf("layout of %s changed", name)
	}
	return src[:i] + src[j:]
}

func mutate(t testing.TB, src, old, new string) string {
	if strings.Count(src, old) != 1 {
		t.Fatalf("mutation site %q found %d times", old, strings.Count(src, old))
	}
	return strings.Replace(src, old, new, 1)
}

// luaMut builds the general-path script with edits (old, new, ...).
func luaMut(t testing.TB, edits ...string) luaWindow {
	src := generalLua(t)
	for i := 0; i < len(edits); i += 2 {
		src = mutate(t, src, edits[i], edits[i+1])
	}
	return luaWindow{store.NewScript(src)}
}

// luaGCRA is GCRA's general path alone (its one-limit fast paths cut),
// through the same small binding (the replies have the same shape): the
// base of the refill mutants below.
type luaGCRA struct{ s *store.Script }

func (g luaGCRA) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	args := []any{req.Cost, 0}
	if req.DryRun {
		args[1] = 1
	}
	for _, l := range req.Limits {
		burst := l.Burst
		if burst == 0 {
			burst = l.Rate
		}
		// the emission interval in whole microseconds, rounded up
		args = append(args, (l.Period.Microseconds()+l.Rate-1)/l.Rate, burst)
	}
	v, err := g.s.Run(ctx, st, req.Keys, args)
	return bindReply(req, v, err, 0)
}

// gcraMut builds GCRA's general path with edits (old, new, ...).
func gcraMut(t testing.TB, edits ...string) luaGCRA {
	src := cutLua(t, "gcra.lua", "if #KEYS == 1 and write then", "-- The general path:")
	for k := 0; k < len(edits); k += 2 {
		src = mutate(t, src, edits[k], edits[k+1])
	}
	return luaGCRA{store.NewScript(src)}
}

// mutantSpec is FixedWindow's Spec (the claims a correct implementation
// makes) for strategy s.
func mutantSpec(name string, s limiter.Strategy) conformance.Spec {
	spec := conformance.FixedWindow()
	spec.Name, spec.Strategy = name, s
	return spec
}

// alignedResetFirst is AlignedWindow whose Reset forgets the first limit's
// window only.
type alignedResetFirst struct{ *strategy.AlignedWindow }

func (a alignedResetFirst) ResetRequest(ctx context.Context, st store.Store, req limiter.Request) error {
	req.Keys, req.Limits = req.Keys[:1], req.Limits[:1]
	return a.AlignedWindow.ResetRequest(ctx, st, req)
}

// windowQuota marks a mutant as limiter.WindowQuota.
type windowQuota struct{ luaWindow }

func (windowQuota) WindowQuota() {}

// TestMutantsFail runs each mutant through the check that must catch it,
// on miniredis, and the unmutated general path through the same checks.
func TestMutantsFail(t *testing.T) {
	fixedSpec := func(name string, s limiter.Strategy) conformance.Spec {
		spec := conformance.FixedWindow()
		spec.Name, spec.Strategy = name, s
		return spec
	}
	gcraSpec := func(name string, s limiter.Strategy) conformance.Spec {
		spec := conformance.GCRA()
		spec.Name, spec.Strategy = name, s
		return spec
	}
	halfReset := []string{"  out[#out + 1] = ttls[i]\n", "  out[#out + 1] = math.max(1, math.floor(ttls[i] / 2))\n"}
	aligned := conformance.AlignedWindow()
	aligned.Name, aligned.Strategy = "AlignedResetFirstOnly", alignedResetFirst{strategy.NewAlignedWindow()}
	mutants := []struct {
		spec  conformance.Spec
		check string
	}{
		// a key found without a TTL repaired for the first limit only
		{fixedSpec("RepairFirstLimitOnly", luaMut(t, "    if repair[i] then", "    if repair[i] and i == 1 then")), "self-repair"},
		// ResetAfter half the time until the window's end; the whole
		// Period whatever has passed of it
		{fixedSpec("ResetAfterHalved", luaMut(t, halfReset...)), "short-and-long-windows"},
		{fixedSpec("ResetAfterHalvedWindowQuota", windowQuota{luaMut(t, halfReset...)}), "short-and-long-windows"},
		{fixedSpec("ResetAfterFullPeriod", luaMut(t, "  out[#out + 1] = ttls[i]\n", "  out[#out + 1] = tonumber(ARGV[o + 2 * i])\n")), "short-and-long-windows"},
		// ResetAfter in whole seconds, rounded up (a TTL read where a
		// PTTL belongs): exact for a window that has whole seconds left
		{fixedSpec("ResetAfterWholeSeconds", luaMut(t, "  out[#out + 1] = ttls[i]\n", "  out[#out + 1] = math.ceil(ttls[i] / 1000) * 1000\n")), "short-and-long-windows"},
		// a denial's RetryAfter in whole seconds, rounded up, likewise
		{fixedSpec("RetryAfterWholeSeconds", luaMut(t, "    retry = ttls[i]\n", "    retry = math.ceil(ttls[i] / 1000) * 1000\n")), "short-and-long-windows"},
		// Remaining one too high on decisions of several limits
		{fixedSpec("MultiLimitRemainingPlusOne", luaMut(t, "  out[#out + 1] = rate - used\n", "  out[#out + 1] = rate - used + (n > 1 and 1 or 0)\n")), "multi-rule-all-or-nothing"},
		// a Peek that decides on the first limit alone
		{fixedSpec("PeekChecksFirstLimitOnly", luaMut(t, "  if count + cost > rate then\n    allowed = 0", "  if count + cost > rate and (write or i == 1) then\n    allowed = 0")), "multi-rule-all-or-nothing"},
		// a denial's RetryAfter taken from the first limit's window
		{fixedSpec("RetryFromFirstLimit", luaMut(t, "    retry = ttls[i]\n", "    retry = ttls[1]\n")), "multi-rule-all-or-nothing"},
		// a denial reporting Remaining 0 whatever is left
		{fixedSpec("DeniedRemainingZero", luaMut(t, "  out[#out + 1] = rate - used\n", "  out[#out + 1] = (allowed == 1) and (rate - used) or 0\n")), "weighted-costs"},
		// AllowMany's results one unit more Remaining than Allow's
		{fixedSpec("AllowManyRemainingPlusOne", scriptWindow{luaMut(t), 1}), "allow-many-exact"},
		// a denial naming a limit that did not deny it (the last one)
		{fixedSpec("DenialNamesLastLimit", lastLimitBinds{strategy.NewFixedWindow()}), "denials-bind"},
		// a cost above the limit admitted on an empty window
		{fixedSpec("CostAboveRateOnFreshKey", luaMut(t, "  if count + cost > rate then\n    allowed = 0", "  if count > 0 and count + cost > rate then\n    allowed = 0")), "hostile-costs"},
		// a Peek that repairs what it finds (a key of a longer period)
		{fixedSpec("PeekRepairs", luaMut(t, "if write then\n  for i = 1, n do\n    if repair[i] then", "if true then\n  for i = 1, n do\n    if repair[i] then")), "period-change"},
		// a Reset that forgets the first limit's window only
		{aligned, "reset-forgets-every-limit"},
		// GCRA's ResetAfter rounded up to 10 ms (every other check passes
		// it: it only ever reports a later reset)
		{gcraSpec("ResetAfterCeil10ms", gcraMut(t, "out[#out + 1] = math.ceil(r / 1000)", "out[#out + 1] = math.ceil(r / 10000) * 10")), "refill-model"},
		// ResetAfter from before the admission
		{gcraSpec("ResetAfterBeforeAdmission", gcraMut(t, "out[#out + 1] = math.ceil(r / 1000)", "out[#out + 1] = math.ceil(rel[i] / 1000)")), "refill-model"},
		// Remaining counting a unit half back as back
		{gcraSpec("RemainingHalfUnit", gcraMut(t, "out[#out + 1] = math.max(math.floor((burst * interval - r) / interval), 0)", "out[#out + 1] = math.max(math.floor((burst * interval - r + interval / 2) / interval), 0)")), "refill-model"},
		// a denial's RetryAfter from the first limit's state
		{gcraSpec("RefillRetryFromFirstLimit", gcraMut(t, "retry = math.max(1, math.ceil((rel[i] + cost", "retry = math.max(1, math.ceil((rel[1] + cost")), "refill-model"},
		// the time left read in steps of 10 ms (units back up to 9 ms
		// early)
		{gcraSpec("TATRead10ms", gcraMut(t, "      if d >= 0 then\n        r = d * 1000\n      else\n        r = (x - 9000000000000000) * 1000", "      if d >= 0 then\n        r = (d - d % 10) * 1000\n      else\n        r = (x - 9000000000000000) * 1000")), "refill-model"},
		// Remaining from before the admission (the call's own cost not
		// taken off)
		{gcraSpec("RemainingBeforeAdmission", gcraMut(t, "out[#out + 1] = math.max(math.floor((burst * interval - r) / interval), 0)", "out[#out + 1] = math.max(math.floor((burst * interval - rel[i]) / interval), 0)")), "refill-model"},
		// a denial's RetryAfter the time until the limit is full again,
		// not until the cost fits
		{gcraSpec("RetryUntilFull", gcraMut(t, "retry = math.max(1, math.ceil((rel[i] + cost * interval - burst * interval) / 1000))", "retry = math.max(1, math.ceil(rel[i] / 1000))")), "refill-model"},
		// a denial of several limits naming the last one, whichever
		// denied it (its numbers the binding limit's)
		{gcraSpec("RefillDenialNamesLastLimit", lastLimitBinds{gcraMut(t)}), "refill-model"},
	}
	// the checks each family's mutants must fail, which its unmutated
	// base must pass (the windows' checks FixedWindow's)
	checks := map[string]map[string]bool{"FixedWindow": {}, "GCRA": {}}
	for _, m := range mutants {
		family := "FixedWindow"
		if m.spec.Refills {
			family = "GCRA"
		}
		checks[family][m.check] = true
		ch, ok := conformance.CheckByName(m.check)
		if !ok {
			t.Fatalf("no check %s", m.check)
		}
		t.Run(m.spec.Name, func(t *testing.T) {
			outcomes := conformance.Run(context.Background(), conformance.Miniredis(dial), []conformance.Spec{m.spec}, []conformance.Check{ch}, false)
			if len(outcomes) != 1 || outcomes[0].Passed || outcomes[0].Skipped || !outcomes[0].FailedOnFinding() {
				t.Fatalf("check %s passes mutant %s: %+v", m.check, m.spec.Name, outcomes)
			}
			t.Logf("%s fails it as it must: %s", m.check, strings.Join(outcomes[0].Messages, " | "))
		})
	}
	// The control: the unmutated general paths (FixedWindow's alone and
	// batched, GCRA's) pass the same checks (the mutations fail them, not
	// the harness).
	for family, specs := range map[string][]conformance.Spec{
		"FixedWindow": {fixedSpec("general", luaMut(t)), fixedSpec("general-batched", scriptWindow{luaMut(t), 0})},
		"GCRA":        {gcraSpec("gcra-general", gcraMut(t))},
	} {
		var all []conformance.Check
		for name := range checks[family] {
			ch, _ := conformance.CheckByName(name)
			all = append(all, ch)
		}
		for _, o := range conformance.Run(context.Background(), conformance.Miniredis(dial), specs, all, false) {
			if !o.Passed {
				t.Errorf("control %s: %s failed (skipped=%v): %v", o.Spec, o.Check, o.Skipped, o.Messages)
			}
		}
	}
}

// lastLimitBinds names the last limit as the binding one of every denial
// of several limits, whichever denied it.
type lastLimitBinds struct{ limiter.Strategy }

func (s lastLimitBinds) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	r, err := s.Strategy.Decide(ctx, st, req)
	if err == nil && !r.Allowed && len(req.Limits) > 1 {
		r.Index = len(req.Limits) - 1
		r.Limit = req.Limits[r.Index]
	}
	return r, err
}
