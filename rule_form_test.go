package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/limitertest"
	"github.com/quotagate/limiter/strategy"
)

// TestLeaseOfAnotherFormNotUsed: a named limit's period changed and
// changed back in this process (a rules reload, then its revert). The
// shorter form counts in the same key and ends the window the lease of
// the first form was counted in; that lease must not admit after it: at
// one instant 10/min admits at most 10 (it admitted 14: 4 units of the old
// lease on top of a new window's 10).
func TestLeaseOfAnotherFormNotUsed(t *testing.T) {
	for name, mk := range map[string]func() limiter.Strategy{
		"FixedWindow": func() limiter.Strategy { return strategy.NewFixedWindow() },
		"Optimistic":  func() limiter.Strategy { return strategy.NewOptimistic() },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			perMin := limiter.Limit{Name: "q", Rate: 10, Period: time.Minute}
			perSec := limiter.Limit{Name: "q", Rate: 10, Period: time.Second}
			for _, many := range []bool{false, true} {
				lim, clock := limitertest.New(t, mk(), limiter.WithQuotaLease(5))
				if r, err := lim.Allow(ctx, "s", perMin); err != nil || !r.Allowed || !r.Leased {
					t.Fatalf("first call = %+v, %v; want admitted from a lease", r, err)
				}
				// the rule becomes 10/s: the key's window is cut to 1 s
				if many {
					if a := lim.AllowMany(ctx, []limiter.Ask{{Key: "s", Limits: []limiter.Limit{perSec}}}); a[0].Err != nil {
						t.Fatal(a[0].Err)
					}
				} else if _, err := lim.Allow(ctx, "s", perSec); err != nil {
					t.Fatal(err)
				}
				clock.Advance(2 * time.Second)
				// and back to 10/min
				n := 0
				for range 30 {
					r, err := lim.Allow(ctx, "s", perMin)
					if err != nil {
						t.Fatal(err)
					}
					if r.Allowed {
						n++
					}
				}
				if n > 10 {
					t.Errorf("AllowMany %t: %s admitted %d at one instant after the rule came back", many, perMin, n)
				}
			}
		})
	}
}

// TestDenyCacheOfAnotherFormNotUsed: a named limit's period changed and
// changed back in this process. The shorter form counts in the same key
// and ends the window of the first form's remembered denial; that denial
// must not be served after it (it was, for the rest of the old minute,
// although Redis would admit).
func TestDenyCacheOfAnotherFormNotUsed(t *testing.T) {
	for name, mk := range map[string]func() limiter.Strategy{
		"FixedWindow": func() limiter.Strategy { return strategy.NewFixedWindow() },
		"Optimistic":  func() limiter.Strategy { return strategy.NewOptimistic() },
		"GCRA":        func() limiter.Strategy { return strategy.NewGCRA() },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			perMin := limiter.Limit{Name: "q", Rate: 2, Period: time.Minute}
			perSec := limiter.Limit{Name: "q", Rate: 2, Period: time.Second}
			for _, many := range []bool{false, true} {
				lim, clock := limitertest.New(t, mk(), limiter.WithDenyCache(64))
				for range 2 {
					if r, err := lim.Allow(ctx, "s", perMin); err != nil || !r.Allowed {
						t.Fatalf("= %+v, %v; want admitted", r, err)
					}
				}
				if r, err := lim.Allow(ctx, "s", perMin); err != nil || r.Allowed {
					t.Fatalf("third of %s = %+v, %v; want denied", perMin, r, err)
				}
				if many {
					if a := lim.AllowMany(ctx, []limiter.Ask{{Key: "s", Limits: []limiter.Limit{perSec}}}); a[0].Err != nil {
						t.Fatal(a[0].Err)
					}
				} else if _, err := lim.Allow(ctx, "s", perSec); err != nil {
					t.Fatal(err)
				}
				clock.Advance(2 * time.Second)
				r, err := lim.Allow(ctx, "s", perMin)
				if err != nil {
					t.Fatal(err)
				}
				if !r.Allowed {
					t.Errorf("AllowMany %t: %s after the rule came back = %+v; want admitted (the window the remembered denial was for has ended)", many, perMin, r)
				}
			}
		})
	}
}
