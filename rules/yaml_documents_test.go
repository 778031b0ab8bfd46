package rules_test

import (
	"errors"
	"testing"

	"github.com/quotagate/limiter/rules"
)

func TestYAMLSecondDocumentRefused(t *testing.T) {
	data := []byte("subjects:\n  a: [{name: qps, rate: 1, period: 1s}]\n---\ndefault: allow\n")
	s, err := rules.ParseYAML(data)
	if !errors.Is(err, rules.ErrInvalidConfig) {
		t.Errorf("two documents: %+v, %v; want ErrInvalidConfig", s, err)
	}
}

func TestYAMLEmptyDocumentsAfter(t *testing.T) {
	for _, data := range []string{"default: allow\n---\n", "default: allow\n---\n# a comment\n---\n", "---\ndefault: allow\n...\n"} {
		s, err := rules.ParseYAML([]byte(data))
		if err != nil || s.Default.Action != rules.Allow {
			t.Errorf("%q: %+v, %v; want default allow", data, s, err)
		}
	}
}

// TestYAMLLeadingZeroIsDecimal: a rate written with a leading zero is the
// decimal number, as YAML 1.2 and JSON read it (yaml.v3 read "0100" as the
// octal 64, and "0900", no octal, as 900); an explicit 0o or 0x prefix keeps
// its base; a scalar in quotes stays a string, refused.
func TestYAMLLeadingZeroIsDecimal(t *testing.T) {
	for _, tc := range []struct {
		rate string
		want int64
	}{{"0100", 100}, {"010", 10}, {"0900", 900}, {"+0100", 100}, {"100", 100}, {"0o100", 64}, {"0x40", 64}} {
		s, err := rules.ParseYAML([]byte("subjects:\n  a: [{name: q, rate: " + tc.rate + ", period: 1s}]\n"))
		if err != nil || s.Subjects["a"][0].Rate != tc.want {
			t.Errorf("rate: %s: %+v, %v; want %d", tc.rate, s, err, tc.want)
		}
	}
	if s, err := rules.ParseYAML([]byte("subjects:\n  a: [{name: q, rate: \"0100\", period: 1s}]\n")); !errors.Is(err, rules.ErrInvalidConfig) {
		t.Errorf(`rate: "0100": %+v, %v; want ErrInvalidConfig (a string)`, s, err)
	}
}
