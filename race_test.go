//go:build race

package limiter_test

// raceDetector: the race detector is on (see norace_test.go); among other
// things, sync.Pool then drops a quarter of what goes back to it.
const raceDetector = true
