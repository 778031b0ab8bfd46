package limiter

import "testing"

// BenchmarkKeyBuild measures the keys of one decision with one limit and a
// plain subject, as Allow builds them.
func BenchmarkKeyBuild(b *testing.B) {
	kb := keyBuilder{prefix: DefaultPrefix}
	limits := []Limit{PerSecond(100)}
	var dst [2]string
	b.ReportAllocs()
	for b.Loop() {
		if _, err := kb.build("user-01-1", limits, dst[:]); err != nil {
			b.Fatal(err)
		}
	}
}
