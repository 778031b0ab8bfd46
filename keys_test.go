package limiter_test

import (
	"strings"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/conformance"
)

// keySlot is the suite's CLUSTER KEYSLOT.
var keySlot = conformance.KeySlot

func TestKeySlot(t *testing.T) {
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	for key, want := range map[string]uint16{"123456789": 12739, "foo": 12182, "{user1000}.following": 3443, "foo{}{bar}": 8363} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
}

var hostile = []string{"{", "}", "{}", "}{", "a{b}c", "a}b", "#x", "\r\n", "a\x00b", "🚦", " ", strings.Repeat("x", 1<<20), strings.Repeat("y", 128), strings.Repeat("y", 129)}

// TestKeysShareSlot: every key of a multi-limit decision has one hash slot,
// for any subject, and no key is longer than a few hundred bytes.
func TestKeysShareSlot(t *testing.T) {
	limits := []limiter.Limit{limiter.PerSecond(1), limiter.PerMinute(1), limiter.PerDay(1).Named("daily")}
	for _, s := range append(hostile, "user:42", "appkey-method") {
		var slot uint16
		for i, l := range limits {
			k, err := limiter.Key("rl", s, l)
			if err != nil {
				t.Fatalf("Key(%.20q): %v", s, err)
			}
			if len(k) > 300 {
				t.Errorf("Key(%.20q) is %d bytes", s, len(k))
			}
			if strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 || strings.Index(k, "{")+1 == strings.Index(k, "}") {
				t.Errorf("Key(%.20q) = %.60q: want exactly one non-empty hash tag", s, k)
			}
			if i == 0 {
				slot = keySlot(k)
			} else if keySlot(k) != slot {
				t.Errorf("subject %.20q: keys in slots %d and %d", s, slot, keySlot(k))
			}
		}
	}
}

func TestKeysInjective(t *testing.T) {
	seen := map[string]string{}
	names := []string{"", "a", "1000ms", "n=a", "}", ":"}
	subjects := append(hostile, "a", "a:", ":a", "a}:x", "#", "##", "a b")
	for _, s := range subjects {
		for _, n := range names {
			for _, p := range []time.Duration{time.Second, time.Minute} {
				k, err := limiter.Key("rl", s, limiter.Limit{Rate: 1, Period: p, Name: n})
				if err != nil {
					t.Fatal(err)
				}
				in := s + "\x00" + n + "\x00" + p.String()
				if n != "" {
					in = s + "\x00" + n // a named limit's counter does not depend on its period
				}
				if prev, ok := seen[k]; ok && prev != in {
					t.Errorf("inputs %.30q and %.30q share key %.60q", prev, in, k)
				}
				seen[k] = in
			}
		}
	}
}

// TestForgedHashTag: a subject spelled as another subject's hashed tag
// ("#" and 32 hex digits) is hashed too: it never takes that subject's
// keys.
func TestForgedHashTag(t *testing.T) {
	l := limiter.Limit{Rate: 1, Period: time.Second}
	hashed := 0
	for _, s := range hostile {
		k, err := limiter.Key("rl", s, l)
		if err != nil {
			t.Fatal(err)
		}
		tag := k[strings.IndexByte(k, '{')+1 : strings.IndexByte(k, '}')]
		if !strings.HasPrefix(tag, "#") {
			continue
		}
		hashed++
		forged, err := limiter.Key("rl", tag, l)
		if err != nil || forged == k {
			t.Errorf("subject %q (the hashed tag of %.30q) = %q, %v; want a key of its own, not %q", tag, s, forged, err, k)
		}
	}
	if hashed == 0 {
		t.Fatal("no hostile subject is hashed: the test proves nothing")
	}
}

// FuzzKey: distinct (subject, name) pairs never share a key, and keys stay
// short whatever the subject.
func FuzzKey(f *testing.F) {
	f.Add("a", "", "b", "")
	f.Add("{", "x", "}", "x")
	f.Add("#00", "", "\x00", "")
	f.Fuzz(func(t *testing.T, s1, n1, s2, n2 string) {
		k1, err1 := limiter.Key("p", s1, limiter.Limit{Rate: 1, Period: time.Second, Name: n1})
		k2, err2 := limiter.Key("p", s2, limiter.Limit{Rate: 1, Period: time.Second, Name: n2})
		if err1 != nil || err2 != nil {
			return
		}
		if (s1 != s2 || n1 != n2) && k1 == k2 {
			t.Fatalf("(%q,%q) and (%q,%q) share key %q", s1, n1, s2, n2, k1)
		}
		if len(k1) > 300 {
			t.Fatalf("key of %d bytes", len(k1))
		}
	})
}
