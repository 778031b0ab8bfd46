// Package benchmarks compares the limiter's strategies with other Go rate
// limiters (go-redis/redis_rate, ulule/limiter, throttled) on one
// redis-server, in one run, as ratios: decisions per
// second at several concurrency levels and the server's time per decision
// (INFO commandstats). It is a module of its own, so that the limiter
// module's users never download the peers it compares with.
//
//	cd benchmarks && go test -run '^$' -bench . -benchtime 1x
//
// BenchmarkPeers logs the comparison table the README shows.
package benchmarks
