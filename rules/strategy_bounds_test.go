package rules_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/strategy"
)

// TestReloadRefusesALimitTheStrategyCannotHold: rules.Set.Validate checks
// only the limiter's generic bounds, not the strategy's own (SlidingLog at
// most 10 000 per window; TokenBucket burst×period(µs) <= 2^51, i.e. about
// 26 000 per day). A hash edit to "20000 per day" is accepted by Reload,
// replaces the last good rules, and from then on every request of the
// subject fails with limiter.ErrInvalidLimit (in every fail mode).
func TestReloadRefusesALimitTheStrategyCannotHold(t *testing.T) {
	for name, s := range map[string]limiter.Strategy{"SlidingLog": strategy.NewSlidingLog(), "TokenBucket": strategy.NewTokenBucket()} {
		t.Run(name, func(t *testing.T) {
			m := redistest.NewMini(t)
			b := newBackend(t, m.Addr(), m)
			ctx := context.Background()
			lim, err := limiter.New(b.st, s, limiter.WithPrefix(prefix), limiter.WithFailMode(limiter.FailOpen))
			if err != nil {
				t.Fatal(err)
			}
			good := limiter.PerDay(10_000).Named("qpd")
			b.hset(t, "limits", "app", rulesJSON(t, good))
			rl, err := rules.New(ctx, lim, rules.RedisHash{Store: b.st, Key: "limits"})
			if err != nil {
				t.Fatal(err)
			}
			if d, err := rl.Allow(ctx, "app"); err != nil || !d.Allowed {
				t.Fatalf("under the good rules: %+v, %v", d, err)
			}
			b.hset(t, "limits", "app", rulesJSON(t, limiter.PerDay(30_000).Named("qpd")))
			changed, err := rl.Reload(ctx)
			t.Logf("Reload of qpd=30000/1d: changed=%v err=%v", changed, err)
			if !errors.Is(err, rules.ErrInvalidConfig) {
				t.Errorf("Reload accepted a rule the limiter's strategy refuses on every call: changed=%v, err=%v; want a *ConfigError and the last good rules kept", changed, err)
			}
			d, err := rl.Allow(ctx, "app")
			t.Logf("Allow after the reload (FailOpen limiter): %+v, err=%v", d, err)
			if err != nil {
				t.Errorf("every request of the subject now fails: %v", err)
			}
		})
	}
}

// TestStrategyBoundErrorNamesSource: a limit the strategy cannot hold is
// reported as every other bad rule is: the error names the source (the
// Redis hash, the file) and the field at fault in the source's terms (a
// hash's field, "app1-order.create"[0]; a file's subjects["a"][0]).
func TestStrategyBoundErrorNamesSource(t *testing.T) {
	m := redistest.NewMini(t)
	b := newBackend(t, m.Addr(), m)
	ctx := context.Background()
	lim, err := limiter.New(b.st, strategy.NewSlidingLog(), limiter.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	b.hset(t, "allRateLimitConfigs", "app1-order.create", rulesJSON(t, limiter.PerSecond(10).Named("qps")))
	rl, err := rules.New(ctx, lim, rules.RedisHash{Store: b.st, Key: "allRateLimitConfigs"})
	if err != nil {
		t.Fatal(err)
	}
	b.hset(t, "allRateLimitConfigs", "app1-order.create", rulesJSON(t, limiter.PerSecond(20_000).Named("qps")))
	_, err = rl.Reload(ctx)
	want := `rules: invalid config: redis hash "allRateLimitConfigs": "app1-order.create"[0]: `
	if err == nil || !strings.HasPrefix(err.Error(), want) || !errors.Is(err, limiter.ErrInvalidLimit) {
		t.Errorf("hash: Reload = %v; want an error starting %q, wrapping ErrInvalidLimit", err, want)
	}
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte("subjects:\n  a: [{name: qps, rate: 20000, period: 1s}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = rules.New(ctx, lim, rules.File(path))
	want = `rules: invalid config: file ` + path + `: subjects["a"][0]: `
	if err == nil || !strings.HasPrefix(err.Error(), want) || !errors.Is(err, limiter.ErrInvalidLimit) {
		t.Errorf("file: New = %v; want an error starting %q, wrapping ErrInvalidLimit", err, want)
	}
}
