package rules_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/rules"
)

// TestRuleNamesDistinct: two rules of a subject known by one name (a rule
// named "per-1s" beside an unnamed 1 s rule, which is known as per-1s)
// count in distinct counters, but headers and reports could not tell them
// apart (RateLimit-Policy listed "per-1s" twice): Validate refuses them.
func TestRuleNamesDistinct(t *testing.T) {
	set := &rules.Set{Default: rules.LimitUnknown(limiter.PerSecond(5).Named("per-1s"), limiter.PerSecond(10))}
	err := set.Validate()
	if !errors.Is(err, rules.ErrInvalidConfig) || !errors.Is(err, limiter.ErrInvalidLimit) || !strings.Contains(err.Error(), `"per-1s"`) {
		t.Errorf("Validate = %v; want a ConfigError naming per-1s, wrapping ErrInvalidLimit", err)
	}
	ok := &rules.Set{Default: rules.LimitUnknown(limiter.PerSecond(5).Named("qps"), limiter.PerSecond(10))}
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate of qps and per-1s = %v; want nil", err)
	}
}
