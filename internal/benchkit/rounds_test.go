package benchkit

import (
	"context"
	"errors"
	"math"
	"reflect"
	"slices"
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

// TestCompare: the variants run one after another, warm once each, then in
// an order that rotates every round; each round's ratios are each
// variant's rate over the first's (the first's always 1), and the tallies
// add the rounds up.
func TestCompare(t *testing.T) {
	k := NewKit([]int{1})
	var mu sync.Mutex
	var runs []string // the variants as they ran, a run counted once
	variant := func(name string, sleeps int) Variant {
		return Variant{Name: name, Decide: func(ctx context.Context, subject string) error {
			mu.Lock()
			if len(runs) == 0 || runs[len(runs)-1] != name {
				runs = append(runs, name)
			}
			mu.Unlock()
			for range sleeps {
				time.Sleep(50 * time.Microsecond)
			}
			return nil
		}}
	}
	// b sleeps 20 times per call, a once: about a twentieth of a's rate,
	// however long the timer takes to wake a sleeper on a busy machine
	vs := []Variant{variant("a", 1), variant("b", 20)}
	tallies, ratios, err := k.Compare(1, 3, 20*time.Millisecond, 40*time.Millisecond, vs)
	if err != nil {
		t.Fatal(err)
	}
	// warm a, warm b; rounds a b, b a, a b (a run that follows the same
	// variant's is one run)
	if want := []string{"a", "b", "a", "b", "a", "b"}; !reflect.DeepEqual(runs, want) {
		t.Errorf("runs %v; want %v", runs, want)
	}
	if len(ratios) != 2 || len(ratios[0]) != 3 || len(ratios[1]) != 3 {
		t.Fatalf("ratios %v; want 3 per variant", ratios)
	}
	for r := range 3 {
		if ratios[0][r] != 1 || ratios[1][r] <= 0 || ratios[1][r] >= 0.5 {
			t.Errorf("round %d: ratios %v, %v; want 1 and b's (slower) rate over a's, below 0.5", r, ratios[0][r], ratios[1][r])
		}
	}
	for i, tl := range tallies {
		if tl.N < 3 || tl.D < 3*40*time.Millisecond {
			t.Errorf("%s: tally %+v; want 3 rounds of at least 40ms and a call each", vs[i].Name, tl)
		}
	}
	if tallies[0].N <= tallies[1].N {
		t.Errorf("tallies %+v; want more calls of a (the faster)", tallies)
	}
	boom := errors.New("boom")
	failing := Variant{Name: "f", Decide: func(ctx context.Context, subject string) error { return boom }}
	if _, _, err := k.Compare(1, 1, time.Millisecond, time.Millisecond, []Variant{vs[0], failing}); !errors.Is(err, boom) {
		t.Errorf("a failing variant: %v; want boom", err)
	}
}

// TestMedian: the middle value, the mean of the middle two for an even
// count, NaN for none, whatever the order, and the input left as it was.
func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{0.9, 1.1}, 1},
		{[]float64{5, 5, 1, 9, 7}, 5},
	} {
		in := slices.Clone(tc.xs)
		if got := Median(tc.xs); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", in, got, tc.want)
		}
		if !reflect.DeepEqual(tc.xs, in) {
			t.Errorf("Median changed its input: %v, was %v", tc.xs, in)
		}
	}
	if got := Median(nil); !math.IsNaN(got) {
		t.Errorf("Median(nil) = %v, want NaN", got)
	}
}
