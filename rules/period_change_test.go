package rules_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/limitertest"
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/strategy"
)

// swapSource serves the Set last stored.
type swapSource struct{ p atomic.Pointer[rules.Set] }

func (s *swapSource) Load(context.Context) (*rules.Set, error) { return s.p.Load(), nil }

// TestNamedPeriodChange: what Set's doc says of a reload that changes a
// named rule's Period, 3 per hour (all 3 used) to 3 per 2 hours, then 5
// requests: the strategies that keep the count admit none of them;
// AlignedWindow and Bucketed start a fresh window of 3; GCRA reads its
// state (full again in an hour) under the new interval (40 minutes a
// request) as one request free.
func TestNamedPeriodChange(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    limiter.Strategy
		more int
	}{
		{"FixedWindow", strategy.NewFixedWindow(), 0},
		{"SlidingWindow", strategy.NewSlidingWindow(), 0},
		{"SlidingLog", strategy.NewSlidingLog(), 0},
		{"TokenBucket", strategy.NewTokenBucket(), 0},
		{"AlignedWindow", strategy.NewAlignedWindow(), 3},
		{"Bucketed", strategy.NewBucketed(), 3},
		{"GCRA", strategy.NewGCRA(), 1},
	} {
		lim, _ := limitertest.New(t, tc.s)
		src := &swapSource{}
		subject := "app-1-pay"
		src.p.Store(&rules.Set{Subjects: map[string][]limiter.Limit{subject: {limiter.Per(3, time.Hour).Named("quota")}}})
		ctx := context.Background()
		rl, err := rules.New(ctx, lim, src)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if d, err := rl.Allow(ctx, subject); err != nil || !d.Allowed {
				t.Fatalf("%s: %+v, %v; want admitted", tc.name, d, err)
			}
		}
		src.p.Store(&rules.Set{Subjects: map[string][]limiter.Limit{subject: {limiter.Per(3, 2*time.Hour).Named("quota")}}})
		if changed, err := rl.Reload(ctx); !changed || err != nil {
			t.Fatalf("%s: Reload = %v, %v", tc.name, changed, err)
		}
		more := 0
		for range 5 {
			d, err := rl.Allow(ctx, subject)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if d.Allowed {
				more++
			}
		}
		if more != tc.more {
			t.Errorf("%s: after 3 of 3/h and a reload to 3/2h, %d of 5 more admitted; want %d", tc.name, more, tc.more)
		}
	}
}
