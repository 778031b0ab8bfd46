package strategy_test

import (
	"errors"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestSlidingWindowProductBoundExact: Rate × Period in ms of 2^51 is
// valid, one millisecond of Period more is not.
func TestSlidingWindowProductBoundExact(t *testing.T) {
	s := strategy.NewSlidingWindow()
	if err := s.CheckLimit(limiter.Per(1<<25, 1<<26*time.Millisecond)); err != nil {
		t.Errorf("2^25 per 2^26 ms (product 2^51): %v, want valid", err)
	}
	for _, l := range []limiter.Limit{limiter.Per(1<<25, (1<<26+1)*time.Millisecond), limiter.Per(1<<26-1, (1<<25+1)*time.Millisecond)} {
		if err := s.CheckLimit(l); !errors.Is(err, limiter.ErrInvalidLimit) {
			t.Errorf("%s (product above 2^51): %v, want ErrInvalidLimit", l, err)
		}
	}
}
