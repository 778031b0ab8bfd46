package limiter

import (
	"fmt"
	"time"
)

// Bounds on a Limit, checked by every call before any I/O.
const (
	// MinPeriod is the shortest Period: Redis key expiry has millisecond
	// resolution.
	MinPeriod = time.Millisecond
	// MaxPeriod is the longest Period, 31 days: a longer one is almost
	// always a mistake in units, and a monthly quota fits.
	MaxPeriod = 31 * 24 * time.Hour
	// MaxRate is the largest Rate or Burst, 2^50. Counters stay exact in
	// Lua's double-precision numbers far below 2^53.
	MaxRate = 1 << 50
	// MaxLimits is the most limits one call may pass.
	MaxLimits = 16
)

// Limit is one rule: at most Rate units of cost per Period. Limits travel
// with each call, so one Limiter serves any number of rules.
//
// Name identifies the rule's counter. When empty, the counter is named after
// the Period, so changing Rate keeps the current window's count. Two limits
// of one call need distinct names (or periods).
//
// Burst is the most cost admitted at once by strategies with a smooth rate
// (strategy.GCRA, strategy.TokenBucket); 0 means Rate. Window and log
// strategies ignore it.
type Limit struct {
	Rate   int64
	Period time.Duration
	Burst  int64
	Name   string
}

// PerSecond returns a Limit of rate per second.
func PerSecond(rate int64) Limit { return Limit{Rate: rate, Period: time.Second} }

// PerMinute returns a Limit of rate per minute.
func PerMinute(rate int64) Limit { return Limit{Rate: rate, Period: time.Minute} }

// PerHour returns a Limit of rate per hour.
func PerHour(rate int64) Limit { return Limit{Rate: rate, Period: time.Hour} }

// PerDay returns a Limit of rate per day (24 hours, not a calendar day).
func PerDay(rate int64) Limit { return Limit{Rate: rate, Period: 24 * time.Hour} }

// Per returns a Limit of rate per period.
func Per(rate int64, period time.Duration) Limit { return Limit{Rate: rate, Period: period} }

// Named returns a copy of l whose counter is named name.
func (l Limit) Named(name string) Limit { l.Name = name; return l }

// String formats l as "rate/period", with its name when set.
func (l Limit) String() string {
	if l.Name != "" {
		return fmt.Sprintf("%s=%d/%s", l.Name, l.Rate, l.Period)
	}
	return fmt.Sprintf("%d/%s", l.Rate, l.Period)
}

func (l Limit) validate() error {
	switch {
	case l.Rate <= 0:
		return fmt.Errorf("%w: rate %d must be positive", ErrInvalidLimit, l.Rate)
	case l.Rate > MaxRate:
		return fmt.Errorf("%w: rate %d is above %d", ErrInvalidLimit, l.Rate, int64(MaxRate))
	case l.Burst < 0 || l.Burst > MaxRate:
		return fmt.Errorf("%w: burst %d must be in [0, %d]", ErrInvalidLimit, l.Burst, int64(MaxRate))
	case l.Period < MinPeriod:
		return fmt.Errorf("%w: period %s is shorter than %s", ErrInvalidLimit, l.Period, MinPeriod)
	case l.Period > MaxPeriod:
		return fmt.Errorf("%w: period %s is longer than %s", ErrInvalidLimit, l.Period, MaxPeriod)
	case l.Period%time.Millisecond != 0:
		return fmt.Errorf("%w: period %s is not a whole number of milliseconds", ErrInvalidLimit, l.Period)
	}
	return nil
}
