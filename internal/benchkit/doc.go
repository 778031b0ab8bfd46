// Package benchkit holds the machinery shared by the adapter benchmarks in
// store/goredis, store/rueidis and store/redigo: exactly N concurrent
// callers, each on its own few subjects (Kit.FanOut, Kit.Timed); sequential
// allocation counting (Kit.SeqAllocs); the BenchmarkFixedWindow loop over
// callers and variants (Kit.RunFixedWindow); and the interleaved rounds and
// metrics of BenchmarkFixedWindowRatio (Kit.RunRatio); latency quantiles
// (Histogram, Timing); AllowMany batches (ManyAsks, Many); the scripts the
// server-time benchmarks compare with (MinimalScript, IncrPTTLScript); and
// redis-benchmark's rate on the same server (RedisBenchmark).
//
// It is a non-test package used only by tests: each adapter keeps its own
// setup (server, client, script load, key-layout checks) and its variants,
// each a Decide that makes one admitted decision.
package benchkit
