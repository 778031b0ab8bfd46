// Package redistest provides test helpers for code that talks to Redis:
//
//   - Server runs a throw-away redis-server process on a free loopback port.
//   - Mini wraps miniredis with a single controllable clock, so that TIME and
//     key expiry move together.
//   - Proxy is a RESP2/RESP3-aware TCP proxy that injects faults at command
//     and reply boundaries (dropped replies, cut connections, delays,
//     blackholes) and counts the commands it forwards.
package redistest
