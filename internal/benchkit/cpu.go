package benchkit

import (
	"fmt"
	"time"
)

// CPUReading is one variant's calls in one round of CPURounds and the CPU
// time they took: this process's (user and system, every thread) and the
// server's, as serverCPU reads it.
type CPUReading struct {
	N      int64
	Client time.Duration
	Server time.Duration
}

// ClientMicros returns this process's CPU time per call, in µs.
func (r CPUReading) ClientMicros() float64 { return micros(r.Client) / float64(r.N) }

// ServerMicros returns the server's CPU time per call, in µs.
func (r CPUReading) ServerMicros() float64 { return micros(r.Server) / float64(r.N) }

// TotalMicros returns the CPU time per call of client and server together,
// in µs: on a machine whose client and server share the cores, what a call
// costs the machine.
func (r CPUReading) TotalMicros() float64 { return r.ClientMicros() + r.ServerMicros() }

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// CPURounds runs each variant alone with callers goroutines for d, in
// rounds rounds whose order rotates every round, as Compare does, and
// returns, per variant, the calls and the CPU time of each round: this
// process's (ProcessCPU) and the server's (serverCPU, the server process's
// CPU time so far, read before and after). Where ProcessCPU is not
// available, it returns its error.
func (k *Kit) CPURounds(callers, rounds int, d time.Duration, vs []Variant, serverCPU func() (time.Duration, error)) ([][]CPUReading, error) {
	out := make([][]CPUReading, len(vs))
	for r := range rounds {
		for j := range vs {
			vi := (r + j) % len(vs)
			c0, err := ProcessCPU()
			if err != nil {
				return nil, err
			}
			s0, err := serverCPU()
			if err != nil {
				return nil, err
			}
			n, _, err := k.Timed(callers, d, vs[vi].Decide)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", vs[vi].Name, err)
			}
			// the server first: this process's CPU then covers the read
			s1, err := serverCPU()
			if err != nil {
				return nil, err
			}
			c1, err := ProcessCPU()
			if err != nil {
				return nil, err
			}
			out[vi] = append(out[vi], CPUReading{N: n, Client: c1 - c0, Server: s1 - s0})
		}
	}
	return out, nil
}
