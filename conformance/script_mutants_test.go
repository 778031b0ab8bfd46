package conformance_test

import (
	"context"
	"strings"
	"testing"

	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// Mutants of whole scripts: a strategy of ours, unchanged in Go, runs a
// copy of its script with one plausible mistake in a path the mutants of
// mutants_test.go cut away (the paths for one limit, for several limits
// that fit, for a bucket of another form), through a store that swaps the
// script on its way to the server. Each must fail the check named; the
// strategy on an unmutated copy passes the same checks.

// swapScript is a store on which the script from runs as to: an EVALSHA
// of from's hash runs to's, and the NOSCRIPT fallback's EVAL of from's
// source sends to's, so the strategy's own binding (its arguments, its
// reading of the reply) runs to. It batches (store.Batcher) and reaches
// one server (store.OneServer) when the store does, so that AllowMany
// sends a many-request script through it as through the store; it hides
// the store's other optional abilities: RunInt64s takes its path through
// EvalSha.
type swapScript struct {
	store.Store
	from, to *store.Script
}

func (s swapScript) Batch(ctx context.Context, cmds []store.Cmd) []store.Reply {
	return s.Store.(store.Batcher).Batch(ctx, s.swap(cmds))
}

func (s swapScript) OneServer() bool {
	o, ok := s.Store.(store.OneServer)
	return ok && o.OneServer()
}

func (s swapScript) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	if sha == s.from.Hash() {
		sha = s.to.Hash()
	}
	return s.Store.EvalSha(ctx, sha, keys, args)
}

func (s swapScript) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	if src == s.from.Source() {
		src = s.to.Source()
	}
	return s.Store.Eval(ctx, src, keys, args)
}

func (s swapScript) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	return s.Store.Do(ctx, s.swap(cmds)...)
}

// swap returns a copy of cmds with every EVALSHA or EVAL of from sent as
// to's.
func (s swapScript) swap(cmds []store.Cmd) []store.Cmd {
	swapped := make([]store.Cmd, len(cmds))
	for i, c := range cmds {
		swapped[i] = c
		if len(c.Args) == 0 {
			continue
		}
		var to any
		switch {
		case strings.EqualFold(c.Name, "EVALSHA") && c.Args[0] == s.from.Hash():
			to = s.to.Hash()
		case strings.EqualFold(c.Name, "EVAL") && c.Args[0] == s.from.Source():
			to = s.to.Source()
		default:
			continue
		}
		swapped[i].Args = append([]any{to}, c.Args[1:]...)
	}
	return swapped
}

// TestScriptMutantsFail runs each mutant of a whole script through the
// check that must catch it, on miniredis, and the strategy on an unmutated
// copy of its script (another hash, the same code) through the same checks.
func TestScriptMutantsFail(t *testing.T) {
	fixed, aligned, bucket := strategy.FixedWindowScript(), strategy.AlignedWindowScript(), strategy.TokenBucketScript()
	mutants := []struct {
		name   string
		spec   func() conformance.Spec
		script *store.Script
		edits  []string
		check  string
	}{
		// FixedWindow's path for one limit checks only the upper bound of
		// the count INCR returns: a counter planted at -5 admits Rate+5
		{"FixedWindowOneLimitNoLowerBound", conformance.FixedWindow, fixed,
			[]string{"  if c < cost or c > 9007199254740991 then\n", "  if c > 9007199254740991 then\n"}, "corrupt-counter"},
		// its path for several limits that fit keeps a window longer than
		// the limit's period (a period shortened beside another limit)
		{"FixedWindowSeveralLimitsKeepLongWindow", conformance.FixedWindow, fixed,
			[]string{"      if ttl < 0 or ttl > window then\n", "      if ttl < 0 then\n"}, "period-change"},
		// its path for one limit moves the expiry on every admission
		// (PEXPIRE whenever the count fits): each admitted call restarts
		// the window, so a subject asking steadily gets its quota back a
		// Period after its last admission, not its window's first; it
		// still admits Rate per window, so only the expiry's move shows it
		{"FixedWindowOneLimitExpireOnAdmission", conformance.FixedWindow, fixed,
			[]string{"    if ttl < 0 or ttl > window then\n      redis.call('PEXPIRE', key, ARGV[o + 2])", "    if ttl < 0 or ttl > window or c <= rate then\n      redis.call('PEXPIRE', key, ARGV[o + 2])"}, "window-never-slides"},
		// its path for one limit reads a counter in its window's expiry
		// millisecond (PTTL 0) as a live one
		{"FixedWindowOneLimitNoExpiryMillisecond", conformance.FixedWindow, fixed,
			[]string{"  if ttl == 0 then\n    -- the window's expiry millisecond", "  if false then\n    -- the window's expiry millisecond"}, "denials-bind"},
		// AlignedWindow reads a counter DECRBY took below zero as one the
		// call created: a counter planted far above any rate admits
		{"AlignedWindowNegativeAsNew", conformance.AlignedWindow, aligned,
			[]string{"  if v == -cost then\n", "  if v <= -cost then\n"}, "corrupt-counter"},
		// the quota-return script refuses to give back a window's whole
		// count (it may refuse only fewer than the units)
		{"QuotaReturnRefusesWholeCount", conformance.FixedWindow, strategy.QuotaReturnScript(),
			[]string{"if tonumber(v) < units then", "if tonumber(v) <= units then"}, "lease-return-own-window"},
		// the quota-return script takes a window counted anew for the one
		// the units were counted in when the new one ends later (as it
		// does when it starts later): the units go to a window that never
		// counted them
		{"QuotaReturnLaterWindow", conformance.FixedWindow, strategy.QuotaReturnScript(),
			[]string{"if e < 0 or math.abs(e - want) > 2 then", "if e < 0 or want - e > 2 then"}, "lease-return-own-window"},
		// TokenBucket's path for one limit of an interval of no whole
		// millisecond adds what came back without capping it at the burst
		{"TokenBucketOneLimitNoCap", conformance.TokenBucket, bucket,
			[]string{"          if s > full then\n            s = full\n          end\n", ""}, "refill-exact"},
		// the same path caps what came back one unit above the burst (an
		// off-by-one: burst + 1 units of P): after idling, a bucket of
		// burst 3 admits 4 in a row, and its replies stay well formed
		// (the row above ends in a malformed reply instead)
		{"TokenBucketOneLimitCapPastBurst", conformance.TokenBucket, bucket,
			[]string{"          if s > full then\n            s = full\n          end\n", "          if s > full + period then\n            s = full + period\n          end\n"}, "refill-exact"},
		// a denial's RetryAfter counts the units missing whole, forgetting
		// the part of the next one already back: (cost - whole tokens held)
		// intervals, too long by what has come back (never too short, so
		// Wait still works), on the path of intervals of whole ms ...
		{"TokenBucketRetryWholeUnits", conformance.TokenBucket, bucket,
			[]string{"      retry = x[i] + cost * t - cap * t\n", "      retry = (cost - math.floor((cap * t - x[i]) / t)) * t\n"}, "refill-exact"},
		// ... and on the path of other intervals (3 per second)
		{"TokenBucketThirdsRetryWholeUnits", conformance.TokenBucket, bucket,
			[]string{"math.ceil((cost * period - x[i]) / rate)", "math.ceil((cost * period - (x[i] - x[i] % period)) / rate)"}, "refill-exact"},
		// ... and, for a cost above 1, the wait for the next unit and then
		// an interval for each unit after it, each rounded up to the ms:
		// a millisecond too long per unit
		{"TokenBucketThirdsRetryPerUnit", conformance.TokenBucket, bucket,
			[]string{"      retry = math.max(1, math.floor((math.ceil((cost * period - x[i]) / rate) + 999) / 1000))\n",
				"      retry = math.max(1, math.floor((math.ceil((period - x[i] % period) / rate) + 999) / 1000) + (cost - 1 - math.floor(x[i] / period)) * math.floor((math.ceil(period / rate) + 999) / 1000))\n"}, "refill-exact"},
		// the many-request scripts (AllowMany on one server) reuse one
		// request's tables for the next: cut to each request's length,
		// or a request of fewer arguments or keys after one of more reads
		// the last one's (its cost, a limit it does not have)
		{"FixedWindowManyOneLimitKeepLongWindow", conformance.FixedWindow, strategy.FixedWindow{}.ManyScript(fixed),
			[]string{"    if ttl < 0 or ttl > window then\n      redis.call('PEXPIRE', key", "    if ttl < 0 then\n      redis.call('PEXPIRE', key"}, "period-change"},
		// (FixedWindow's: an ask of one limit at cost 1, sent as the
		// limit's arguments alone, after one of more arguments reads the
		// stale ones as {cost, peek, ...}: it is decided as a Peek,
		// admitted and counted nowhere)
		{"FixedWindowManyArgumentsNotCut", conformance.FixedWindow, strategy.FixedWindow{}.ManyScript(fixed),
			[]string{"    for i = na + 1, an do\n      as[i] = nil\n    end\n", ""}, "allow-many-exact"},
		// the many-request script steps to the next request's keys by one
		// key, not by the request's count of keys: an ask after one of two
		// limits counts on that ask's second key
		{"FixedWindowManyKeyStepOne", conformance.FixedWindow, strategy.FixedWindow{}.ManyScript(fixed),
			[]string{"  k, a, kn = k + nk, a + 2, nk\n", "  k, a, kn = k + 1, a + 2, nk\n"}, "allow-many-exact"},
		{"GCRAManyArgumentsNotCut", conformance.GCRA, strategy.GCRA{}.ManyScript(strategy.GCRAScript()),
			[]string{"    for i = na + 1, an do\n      as[i] = nil\n    end\n", ""}, "allow-many-exact"},
		{"SlidingWindowManyKeysNotCut", conformance.SlidingWindow, strategy.SlidingWindow{}.ManyScript(strategy.SlidingWindowScript()),
			[]string{"  for i = nk + 1, kn do\n    ks[i] = nil\n  end\n", ""}, "allow-many-exact"},
		// the lease script takes a lease with ZADD NX (so that a retried
		// Acquire takes no second slot), which renews nothing: an Acquire of
		// an ID already held leaves it ending at its first TTL, and a holder
		// that renews by acquiring again loses its slot while it works
		{"LeaseAcquireNoRenew", conformance.Concurrency, strategy.LeaseScript(),
			[]string{"  redis.call('ZADD', key, string.format('%d', now + ttl), id)\n", "  redis.call('ZADD', key, op == 'a' and 'NX' or 'XX', string.format('%d', now + ttl), id)\n"}, "retried-lease-holds-one"},
	}
	ctx := context.Background()
	run := func(t *testing.T, spec conformance.Spec, from, to *store.Script, check string) conformance.Outcome {
		t.Helper()
		ch, ok := conformance.CheckByName(check)
		if !ok {
			t.Fatalf("no check %s", check)
		}
		mk := conformance.Miniredis(conformance.WrapDialer(dial, func(st store.Store) store.Store { return swapScript{st, from, to} }))
		outcomes := conformance.Run(ctx, mk, []conformance.Spec{spec}, []conformance.Check{ch}, false)
		if len(outcomes) != 1 {
			t.Fatalf("check %s on %s: %d outcomes, want 1: %+v", check, spec.Name, len(outcomes), outcomes)
		}
		return outcomes[0]
	}
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			src := m.script.Source()
			for i := 0; i < len(m.edits); i += 2 {
				src = mutate(t, src, m.edits[i], m.edits[i+1])
			}
			spec := m.spec()
			spec.Name = m.name
			o := run(t, spec, m.script, store.NewScript(src), m.check)
			if o.Passed || o.Skipped || !o.FailedOnFinding() {
				t.Fatalf("check %s passes mutant %s: %+v", m.check, m.name, o)
			}
			t.Logf("%s fails it as it must: %s", m.check, strings.Join(o.Messages, " | "))
			// The control: the same strategy on the same script, sent
			// through the same swap under another hash, passes.
			spec = m.spec()
			copied := store.NewScript(m.script.Source() + "\n-- an unmutated copy\n")
			if o := run(t, spec, m.script, copied, m.check); !o.Passed {
				t.Errorf("control %s: %s failed (skipped=%v): %v", spec.Name, m.check, o.Skipped, o.Messages)
			}
		})
	}
}
