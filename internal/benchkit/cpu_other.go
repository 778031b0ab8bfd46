//go:build !unix

package benchkit

import (
	"errors"
	"time"
)

// ProcessCPU returns the CPU time this process has used so far; on this
// platform it is not read.
func ProcessCPU() (time.Duration, error) {
	return 0, errors.New("benchkit: the process's CPU time is read on unix only")
}
