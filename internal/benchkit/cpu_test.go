package benchkit

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// spin does n units of CPU work that the compiler cannot drop.
func spin(n int) uint64 {
	x := uint64(1)
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

var sink atomic.Uint64

// TestCPURounds: each reading is the variant's own calls and the CPU time
// they took, this process's and the server's, in the rotating order; a
// variant that works four times as hard per call reads about four times
// the client CPU per call; an error of the server's reader stops the
// rounds.
func TestCPURounds(t *testing.T) {
	if _, err := ProcessCPU(); err != nil {
		if runtime.GOOS == "windows" || runtime.GOOS == "plan9" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
			t.Skipf("no process CPU time here: %v", err)
		}
		t.Fatal(err)
	}
	k := NewKit([]int{1})
	const unit = 20000
	work := func(units int) Variant {
		return Variant{Name: "w", Decide: func(ctx context.Context, subject string) error {
			sink.Add(spin(units * unit))
			return nil
		}}
	}
	vs := []Variant{work(1), work(4)}
	var server time.Duration
	serverCPU := func() (time.Duration, error) {
		server += 3 * time.Millisecond // 3 ms of the server's CPU from one read to the next
		return server, nil
	}
	readings, err := k.CPURounds(1, 4, 40*time.Millisecond, vs, serverCPU)
	if err != nil {
		t.Fatal(err)
	}
	for vi, rs := range readings {
		if len(rs) != 4 {
			t.Fatalf("variant %d: %d readings; want 4", vi, len(rs))
		}
		for r, x := range rs {
			if x.N < 1 || x.Client <= 0 || x.Server != 3*time.Millisecond {
				t.Errorf("variant %d, round %d: %+v; want calls, client CPU, and 3ms of the server's", vi, r, x)
			}
			if got, want := x.ServerMicros(), 3000/float64(x.N); got != want {
				t.Errorf("ServerMicros %v; want %v", got, want)
			}
			if x.TotalMicros() != x.ClientMicros()+x.ServerMicros() {
				t.Errorf("TotalMicros %v", x.TotalMicros())
			}
		}
	}
	var light, heavy []float64
	for r := range 4 {
		light = append(light, readings[0][r].ClientMicros())
		heavy = append(heavy, readings[1][r].ClientMicros())
	}
	if x := Median(heavy) / Median(light); x < 2 || x > 8 {
		t.Errorf("client CPU per call, 4x the work: %.2fx (light %v µs, heavy %v µs); want about 4x", x, light, heavy)
	}
	boom := errors.New("boom")
	if _, err := k.CPURounds(1, 2, time.Millisecond, vs, func() (time.Duration, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Errorf("server reader failing: %v; want boom", err)
	}
}
