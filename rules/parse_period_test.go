package rules_test

import (
	"errors"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/rules"
)

// TestParsePeriodErrors: a period ParsePeriod cannot read is an error
// matching ErrInvalidConfig (its errors matched no sentinel); one it reads
// but no limit may have is Validate's to refuse.
func TestParsePeriodErrors(t *testing.T) {
	for _, s := range []string{"soon", "32d", "0d", "1.5d", "1d12h", ""} {
		if d, err := rules.ParsePeriod(s); !errors.Is(err, rules.ErrInvalidConfig) || errors.Is(err, limiter.ErrInvalidLimit) {
			t.Errorf("ParsePeriod(%q) = %s, %v; want an error matching ErrInvalidConfig alone", s, d, err)
		}
	}
	for s, want := range map[string]time.Duration{"1ms": time.Millisecond, "1s": time.Second, "1h30m": 90 * time.Minute, "7d": 7 * 24 * time.Hour, "31d": limiter.MaxPeriod, "745h": 745 * time.Hour} {
		if d, err := rules.ParsePeriod(s); err != nil || d != want {
			t.Errorf("ParsePeriod(%q) = %s, %v; want %s", s, d, err, want)
		}
	}
	set := &rules.Set{Subjects: map[string][]limiter.Limit{"a": {{Rate: 1, Period: 745 * time.Hour}}}}
	if err := set.Validate(); !errors.Is(err, limiter.ErrInvalidLimit) {
		t.Errorf("Validate of a 745h period = %v; want ErrInvalidLimit", err)
	}
}
