package limiter

import (
	"testing"
	"time"
)

// TestJitterLeavesTimeForTheTry: the jitter is at most a millisecond, and
// at most half of what the sleep leaves before the deadline, so that a
// sleep that fits the deadline never ends on it.
func TestJitterLeavesTimeForTheTry(t *testing.T) {
	for _, tc := range []struct {
		wait, left time.Duration
		ok         bool
		most       time.Duration
	}{
		{100 * time.Millisecond, 0, false, maxJitter},
		{100 * time.Millisecond, time.Second, true, maxJitter},
		{100 * time.Millisecond, 100*time.Millisecond + 800*time.Microsecond, true, 400 * time.Microsecond},
		{100 * time.Millisecond, 100 * time.Millisecond, true, 0},
		{100 * time.Millisecond, 50 * time.Millisecond, true, 0}, // past the deadline
	} {
		var most time.Duration
		for range 2000 {
			most = max(most, jitter(tc.wait, tc.left, tc.ok))
		}
		// 2000 draws: the largest is within 1% of the bound but for a
		// chance of 0.99^2000
		if most > tc.most || most < tc.most*99/100 {
			t.Errorf("jitter(%s, %s, %v): the largest of 2000 is %s; want at most %s, and near it", tc.wait, tc.left, tc.ok, most, tc.most)
		}
	}
}

// TestJitterBounds: the jitter added to a sleep is at most maxJitter and,
// with a deadline, at most half of what the sleep leaves before it (none
// when the sleep reaches it), so that the next try has the rest.
func TestJitterBounds(t *testing.T) {
	for _, tc := range []struct {
		wait, left time.Duration
		ok         bool
		most       time.Duration
	}{
		{time.Second, 0, false, maxJitter},
		{time.Second, time.Hour, true, maxJitter},
		{time.Second, time.Second + 600*time.Microsecond, true, 300 * time.Microsecond},
		{time.Second, time.Second, true, 0},
		{time.Second, time.Second / 2, true, 0},
	} {
		for range 2000 {
			if j := jitter(tc.wait, tc.left, tc.ok); j < 0 || j > tc.most {
				t.Fatalf("jitter(%s, %s, %v) = %s; want within [0, %s]", tc.wait, tc.left, tc.ok, j, tc.most)
			}
		}
	}
}
