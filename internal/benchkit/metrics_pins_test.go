package benchkit

import (
	"context"
	"sync"
	"testing"
	"time"
)

var allocSink []byte

// TestFanOutSpreadsSubjectsSeqAllocsPerCall: a caller cycles through its
// SubjectsPerCaller subjects, Counted(n) allows exactly n calls, and
// SeqAllocs reports allocations and bytes per call.
func TestFanOutSpreadsSubjectsSeqAllocsPerCall(t *testing.T) {
	k := NewKit([]int{1})
	var mu sync.Mutex
	seen := map[string]int{}
	n, err := k.FanOut(1, Counted(8), func(ctx context.Context, s string) error {
		mu.Lock()
		seen[s]++
		mu.Unlock()
		return nil
	})
	if err != nil || n != 8 {
		t.Fatalf("FanOut with Counted(8): %d calls, %v; want 8", n, err)
	}
	for _, s := range k.Subjects[0] {
		if seen[s] != 2 {
			t.Errorf("subject %s called %d times; want 2 (calls %v)", s, seen[s], seen)
		}
	}
	allocs, bytes, err := k.SeqAllocs(func(ctx context.Context, s string) error {
		allocSink = make([]byte, 1024)
		return nil
	}, 2000)
	if err != nil || allocs < 0.97 || allocs > 1.2 || bytes < 1024 || bytes > 1.2*1024 {
		t.Errorf("SeqAllocs of one 1 KiB allocation per call: %.3f allocs, %.0f B (%v); want about 1 and 1024", allocs, bytes, err)
	}
}

// TestRunRatioMetrics: ratio-cN and median-ratio-cN are the limiter's rate
// over raw's, the extra metric the limiter's over extra's.
func TestRunRatioMetrics(t *testing.T) {
	sleeper := func(n int) Decide {
		return func(context.Context, string) error {
			for range n {
				time.Sleep(200 * time.Microsecond)
			}
			return nil
		}
	}
	k := NewKit([]int{1})
	res := testing.Benchmark(func(b *testing.B) {
		k.RunRatio(b, Variant{Name: "raw", Decide: sleeper(1)}, Variant{Name: "limiter", Decide: sleeper(4)},
			&Extra{Variant: Variant{Name: "slow", Decide: sleeper(16)}, Callers: 1, Metric: "vs-slow-c1"})
	})
	if r := res.Extra["ratio-c1"]; !(r > 0 && r < 0.75) {
		t.Errorf("ratio-c1 %v; want the limiter (4 sleeps) over raw (1), below 0.75", r)
	}
	if r := res.Extra["median-ratio-c1"]; !(r > 0 && r < 0.75) {
		t.Errorf("median-ratio-c1 %v; want below 0.75", r)
	}
	if r := res.Extra["vs-slow-c1"]; !(r > 1.33) {
		t.Errorf("vs-slow-c1 %v; want the limiter (4 sleeps) over extra (16), above 1.33", r)
	}
}
