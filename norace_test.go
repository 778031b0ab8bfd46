//go:build !race

package limiter_test

// raceDetector: the race detector is off (see race_test.go).
const raceDetector = false
