package rules_test

import (
	"context"
	"errors"
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
