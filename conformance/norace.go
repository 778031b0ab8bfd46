//go:build !race

package conformance

// raceEnabled reports whether the race detector is on. Under it every
// call costs several times the CPU, and the checks whose strength is the
// contention, not the number of calls (property 1), make fewer calls per
// caller.
const (
	raceEnabled    = false
	cardinalityDiv = 1 // property 25's subjects: all of them
)
