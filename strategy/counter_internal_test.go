package strategy

import (
	"errors"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// TestParseCounter: counters are read as Redis's INCRBY reads them, and no
// more loosely (strconv.ParseInt takes "+3" and "007", which INCRBY then
// refuses after other limits were written).
func TestParseCounter(t *testing.T) {
	for _, ok := range []struct {
		in   any
		want int64
	}{{"0", 0}, {"7", 7}, {"1234567890123456", 1234567890123456}, {"9007199254740991", 1<<53 - 1}, {int64(3), 3}} {
		if n, err := parseCounter(ok.in); err != nil || n != ok.want {
			t.Errorf("parseCounter(%q) = %d, %v; want %d", ok.in, n, err, ok.want)
		}
	}
	for _, bad := range []any{"", "1.5", " 3", "3 ", "0x2", "1e0", "+3", "-3", "007", "00", "-0", "12345678901234567", "9999999999999999", "abc", int64(-1), []any{}} {
		if n, err := parseCounter(bad); !errors.Is(err, limiter.ErrCorruptCounter) {
			t.Errorf("parseCounter(%#v) = %d, %v; want ErrCorruptCounter", bad, n, err)
		}
	}
	if _, err := parseCounter(nil); !errors.Is(err, store.ErrNil) {
		t.Errorf("parseCounter(nil) = %v; want store.ErrNil", err)
	}
	if n, err := parseCounter("9007199254740992"); !errors.Is(err, limiter.ErrCorruptCounter) {
		t.Errorf("parseCounter(2^53) = %d, %v; want ErrCorruptCounter (not exact in Lua)", n, err)
	}
	// Bucketed reads what INCRBY reads, negatives included (a take-back
	// that met a key reset in between leaves one).
	for in, want := range map[string]int64{"-3": -3, "0": 0, "9223372036854775807": 1<<63 - 1} {
		if n, err := parseRedisInt(in); err != nil || n != want {
			t.Errorf("parseRedisInt(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
	for _, bad := range []string{"-0", "+3", "007", "-", "", " 1", "9223372036854775808", "1.0"} {
		if n, err := parseRedisInt(bad); !errors.Is(err, limiter.ErrCorruptCounter) {
			t.Errorf("parseRedisInt(%q) = %d, %v; want ErrCorruptCounter", bad, n, err)
		}
	}
}

// TestMonoNow checks that the epoch-aligned strategies' default clock
// reads the wall clock (within a second: it does not follow a step of
// the wall clock made while the test runs) and never runs backwards.
func TestMonoNow(t *testing.T) {
	prev := monoNow()
	for range 1000 {
		wall, mono := time.Now(), monoNow()
		if d := mono.Sub(wall).Abs(); d > time.Second {
			t.Fatalf("monoNow %v is %v from time.Now %v", mono, d, wall)
		}
		if mono.UnixMicro() < prev.UnixMicro() {
			t.Fatalf("monoNow ran backwards: %v after %v", mono, prev)
		}
		prev = mono
	}
}

// ptrStore and sliceStore are stores of a pointer type and of a type that
// is not comparable.
type ptrStore struct{ store.Store }
type sliceStore struct {
	store.Store
	tags []string
}

// TestClockForMixedStores checks that the per-store clock lookup neither
// panics nor mixes stores up when a store of a non-comparable type follows
// a store of a pointer type (the lookup's fast path), and back.
func TestClockForMixedStores(t *testing.T) {
	ec := newEpochClock("test")
	p1, p2 := &ptrStore{}, &ptrStore{}
	c1 := ec.clockFor(p1)
	if got := ec.clockFor(p1); got != c1 {
		t.Fatal("the same store got another clock")
	}
	if ec.clockFor(p2) == c1 {
		t.Fatal("two stores share a clock")
	}
	s := sliceStore{tags: []string{"a"}}
	if got := ec.clockFor(s); got != &ec.shared {
		t.Fatalf("a store that is not comparable got %p, want the shared clock %p", got, &ec.shared)
	}
	if got := ec.clockFor(s); got != &ec.shared {
		t.Fatal("a store that is not comparable, again: not the shared clock")
	}
	if got := ec.clockFor(p1); got != c1 {
		t.Fatal("the first store, after the others: another clock")
	}
	// A struct type whose values may hold a store that is not comparable:
	// one that holds such a store cannot be a map key either.
	a, b := wrapStore{Store: p1}, wrapStore{Store: s}
	if ec.clockFor(a) == &ec.shared {
		t.Fatal("a comparable struct store got the shared clock")
	}
	if got := ec.clockFor(b); got != &ec.shared {
		t.Fatalf("a struct store holding a store that is not comparable got %p, want the shared clock", got)
	}
}

// wrapStore is a comparable struct type whose values may hold a store that
// is not.
type wrapStore struct{ store.Store }

// TestWindowSuffix checks the remembered window suffixes against the text
// they stand for, for pairs that share an index or the cache's integer,
// asked in turn so that each replaces the other.
func TestWindowSuffix(t *testing.T) {
	const idx = 1_780_000_000
	pairs := [][2]int64{
		{-1, idx}, {1000, idx}, {60000, idx}, {1000, idx + 1},
		// the same idx ^ period<<32 as {1000, idx}
		{1001, idx ^ 1000<<32 ^ 1001<<32},
	}
	for range 3 {
		for _, p := range pairs {
			want := string(appendWindow(nil, p[0], p[1]))
			if got := windowSuffix(p[0], p[1]); got != want {
				t.Fatalf("windowSuffix(%d, %d) = %q, want %q", p[0], p[1], got, want)
			}
		}
	}
}
