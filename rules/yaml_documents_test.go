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
// its base; digit separators (0_100, 1_000) are read as YAML 1.1 does,
// the leading zero decimal too; a scalar in quotes stays a string, refused.
func TestYAMLLeadingZeroIsDecimal(t *testing.T) {
	for _, tc := range []struct {
		rate string
		want int64
	}{{"0100", 100}, {"010", 10}, {"0900", 900}, {"+0100", 100}, {"100", 100}, {"0o100", 64}, {"0x40", 64}, {"0_100", 100}, {"1_000", 1000}} {
		s, err := rules.ParseYAML([]byte("subjects:\n  a: [{name: q, rate: " + tc.rate + ", period: 1s}]\n"))
		if err != nil || s.Subjects["a"][0].Rate != tc.want {
			t.Errorf("rate: %s: %+v, %v; want %d", tc.rate, s, err, tc.want)
		}
	}
	if s, err := rules.ParseYAML([]byte("subjects:\n  a: [{name: q, rate: \"0100\", period: 1s}]\n")); !errors.Is(err, rules.ErrInvalidConfig) {
		t.Errorf(`rate: "0100": %+v, %v; want ErrInvalidConfig (a string)`, s, err)
	}
}

// TestWholeNumbersWithAFraction: a rule set has the same shape in JSON as
// in YAML: a whole number written with a fraction or an exponent (100.0,
// 1e2) is the number in both (JSON refused it, saying 100.0 is not a
// whole number); 100.5 is refused in both.
func TestWholeNumbersWithAFraction(t *testing.T) {
	for _, rate := range []string{"100.0", "1e2", "100.5"} {
		y, yerr := rules.ParseYAML([]byte("subjects: {a: [{name: q, rate: " + rate + ", period: 1s}]}"))
		j, jerr := rules.ParseJSON([]byte(`{"subjects": {"a": [{"name": "q", "rate": ` + rate + `, "period": "1s"}]}}`))
		if rate == "100.5" {
			if !errors.Is(yerr, rules.ErrInvalidConfig) || !errors.Is(jerr, rules.ErrInvalidConfig) {
				t.Errorf("rate %s: YAML %v, JSON %v; want ErrInvalidConfig from both", rate, yerr, jerr)
			}
			continue
		}
		if yerr != nil || jerr != nil || y.Subjects["a"][0].Rate != 100 || j.Subjects["a"][0].Rate != 100 {
			t.Errorf("rate %s: YAML %+v, %v; JSON %+v, %v; want 100 from both", rate, y, yerr, j, jerr)
		}
	}
}
