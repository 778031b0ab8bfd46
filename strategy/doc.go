// Package strategy holds the rate-limiting algorithms, each written once
// against store.Store so it runs on every adapter: fixed windows in four
// forms (FixedWindow and AlignedWindow in Lua, Bucketed and Optimistic
// without Lua), GCRA and TokenBucket (a smooth rate with an explicit
// burst), SlidingWindow (the
// sliding window counter, O(1)) and SlidingLog (the exact sliding window),
// the last four in Lua on the server's clock; and Concurrency, the leaser
// behind limiter.Concurrency (requests in flight).
//
// Every strategy declares its guarantees in its doc comment, and the
// conformance suite holds it to them:
//
//   - atomic (one server-side step) or optimistic (retried transaction);
//   - exact (admits exactly the limit under contention) or conservative;
//   - whether denied requests consume quota;
//   - the time source (Redis, never the app server's clock);
//   - keys per decision, Cluster safety, the Redis version needed.
//
// Lua scripts live in lua/*.lua, embedded with go:embed; user data reaches
// them only as KEYS and ARGV.
package strategy
