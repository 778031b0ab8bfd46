package benchkit

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestServerRounds: each reading goes to the variant that ran since the
// last reset, the order rotates every round, and an error stops the
// rounds.
func TestServerRounds(t *testing.T) {
	k := NewKit([]int{2})
	var ran []string
	var mu sync.Mutex
	var calls map[string]int
	variant := func(name string) Variant {
		return Variant{Name: name, Decide: func(ctx context.Context, subject string) error {
			mu.Lock()
			defer mu.Unlock()
			calls[name]++
			return nil
		}}
	}
	vs := []Variant{variant("a"), variant("b"), variant("c")}
	reset := func() error { calls = map[string]int{}; return nil }
	read := func() (float64, error) {
		if len(calls) != 1 {
			t.Fatalf("calls since the reset: %v; want one variant's", calls)
		}
		for name := range calls {
			ran = append(ran, name)
			return float64(name[0] - 'a' + 1), nil
		}
		return 0, nil
	}
	us, err := k.ServerRounds(2, 3, 5*time.Millisecond, vs, reset, read)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "c", "b", "c", "a", "c", "a", "b"}; !reflect.DeepEqual(ran, want) {
		t.Errorf("order %v; want %v", ran, want)
	}
	if want := [][]float64{{1, 1, 1}, {2, 2, 2}, {3, 3, 3}}; !reflect.DeepEqual(us, want) {
		t.Errorf("readings %v; want %v", us, want)
	}
	if got := RoundRatios(us[2], us[1]); !reflect.DeepEqual(got, []float64{1.5, 1.5, 1.5}) {
		t.Errorf("ratios %v", got)
	}
	boom := errors.New("boom")
	if _, err := k.ServerRounds(2, 3, time.Millisecond, vs, func() error { return boom }, read); !errors.Is(err, boom) {
		t.Errorf("reset failing: %v; want boom", err)
	}
}

// TestTimedCallsAtLeastOnce: a round that ends before any caller starts
// (as on a loaded machine) still makes a call, so the server reading taken
// after it is never a reading of zero calls.
func TestTimedCallsAtLeastOnce(t *testing.T) {
	k := NewKit([]int{4})
	for i := range 200 {
		var calls atomic.Int64
		n, _, err := k.Timed(4, 0, func(ctx context.Context, subject string) error {
			calls.Add(1)
			return nil
		})
		if err != nil || n < 1 || n != calls.Load() {
			t.Fatalf("try %d: Timed for 0s made %d calls (counted %d), err %v; want at least 1", i, n, calls.Load(), err)
		}
	}
}
