package main

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotagate/limiter/internal/benchkit"
)

// TestMeasureLatenciesExcludeWarmUp: a level's p50/p99 are of the rounds'
// calls, as its rates are, not of the warm-up's. The limiter's calls are
// instant in its allocation count (its first run) and warm-up (its second)
// and take at least 3 ms in the rounds: every round call is >= 3 ms.
func TestMeasureLatenciesExcludeWarmUp(t *testing.T) {
	var rawCalls atomic.Int64
	raw := func(context.Context, string) error { rawCalls.Add(1); return nil }
	var mu sync.Mutex
	last, runs := int64(-1), 0
	lim := func(context.Context, string) error {
		mu.Lock()
		if rc := rawCalls.Load(); rc != last { // raw ran since: a new run of the limiter
			runs, last = runs+1, rc
		}
		slow := runs >= 3
		mu.Unlock()
		if slow {
			time.Sleep(3 * time.Millisecond)
		}
		return nil
	}
	lv := level{kit: benchkit.NewKit([]int{1}), rounds: 1, round: 20 * time.Millisecond, allocCalls: 1, per: 1}
	var rows []benchRow
	if err := lv.measure(raw, lim, func(r benchRow) { rows = append(rows, r) }); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	if r := rows[0]; r.P50Micros < 3000 || r.P99Micros < 3000 {
		t.Errorf("limiter p50 %.0fµs, p99 %.0fµs; every call of the rounds took at least 3 ms (the warm-up's calls were counted)", r.P50Micros, r.P99Micros)
	}
}
