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
