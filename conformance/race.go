//go:build race

package conformance

// raceEnabled: the race detector is on; see norace.go.
const (
	raceEnabled    = true
	cardinalityDiv = 4
)
