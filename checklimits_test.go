package limiter_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/limitertest"
	"github.com/quotagate/limiter/strategy"
)

// CheckLimits refuses what every call refuses: each case below is refused
// by every Allow (and by Key, for one limit), so CheckLimits refuses it.
func TestCheckLimitsAgreesWithCalls(t *testing.T) {
	ctx := context.Background()
	lim, _ := limitertest.New(t, strategy.NewFixedWindow())
	long := limiter.Limit{Rate: 1, Period: time.Minute, Name: strings.Repeat("a", limiter.MaxNameLen+1)}
	seventeen := make([]limiter.Limit, limiter.MaxLimits+1)
	for i := range seventeen {
		seventeen[i] = limiter.PerMinute(1).Named(strings.Repeat("n", i+1))
	}
	cases := []struct {
		name   string
		limits []limiter.Limit
	}{
		{"name longer than MaxNameLen", []limiter.Limit{long}},
		{"two limits sharing one counter", []limiter.Limit{limiter.PerMinute(1), limiter.PerMinute(5)}},
		{"more than MaxLimits limits", seventeen},
		{"no limits", nil},
	}
	for _, c := range cases {
		_, callErr := lim.Allow(ctx, "subject", c.limits...)
		if !errors.Is(callErr, limiter.ErrInvalidLimit) {
			t.Fatalf("%s: Allow = %v, want ErrInvalidLimit", c.name, callErr)
		}
		if len(c.limits) == 1 {
			if _, err := limiter.Key(limiter.DefaultPrefix, "subject", c.limits[0]); !errors.Is(err, limiter.ErrInvalidLimit) {
				t.Fatalf("%s: Key = %v, want ErrInvalidLimit", c.name, err)
			}
		}
		if err := lim.CheckLimits(c.limits...); !errors.Is(err, limiter.ErrInvalidLimit) {
			t.Errorf("%s: CheckLimits = %v, but every call refuses them: %v", c.name, err, callErr)
		}
	}
}
