package benchkit

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"net"
	"os/exec"
	"strconv"
)

// RedisBenchmark runs redis-benchmark against the server at addr with
// clients connections, pipeline commands in flight on each, n requests of
// command (its "__rand_int__" replaced from a key space of 100 000), and
// returns its requests per second. It fails when redis-benchmark is not
// installed.
func RedisBenchmark(addr string, clients, pipeline, n int, command ...string) (float64, error) {
	return RedisBenchmarkKeys(addr, clients, pipeline, n, 100_000, command...)
}

// RedisBenchmarkKeys is RedisBenchmark with "__rand_int__" replaced from
// a key space of keys.
func RedisBenchmarkKeys(addr string, clients, pipeline, n, keys int, command ...string) (float64, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	args := []string{"-h", host, "-p", port, "-c", strconv.Itoa(clients), "-P", strconv.Itoa(pipeline),
		"-n", strconv.Itoa(n), "-r", strconv.Itoa(keys), "--csv"}
	out, err := exec.Command("redis-benchmark", append(args, command...)...).Output()
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark: %w", err)
	}
	rows, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil || len(rows) < 2 || len(rows[len(rows)-1]) < 2 {
		return 0, fmt.Errorf("redis-benchmark: unexpected output %q", out)
	}
	return strconv.ParseFloat(rows[len(rows)-1][1], 64)
}
