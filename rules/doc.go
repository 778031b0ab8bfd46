// Package rules decides requests under a rule set: several limits per
// subject (an appkey+method, a user, an IP), a default for unknown
// subjects, and an optional fail mode, loaded from Go, a JSON or YAML file,
// or a Redis hash, and reloaded while the service runs without resetting
// any counter.
//
// It is the common hand-written design made right. That design keeps, per
// appkey-method, a list of limits (per second, per day, ...) in a Redis
// hash and checks them one by one, each check consuming quota, and admits
// the request on any error. Here:
//
//   - all the rules of a subject are one atomic, all-or-nothing decision of
//     the limiter (a request refused by the per-second rule consumes nothing
//     from the daily one), and the Decision names the binding rule;
//   - a subject without rules gets the set's Default: deny (the zero value),
//     allow, or limits of its own;
//   - a backend error follows the fail mode (the limiter's, or the set's
//     FailMode): returned, or a Degraded decision, never a silent admit;
//   - invalid rules are rejected with a *ConfigError naming the field, and
//     on reload a bad rule set keeps the last good one in force.
//
// A rule set in a file (JSON has the same shape):
//
//	default: deny            # deny | allow | a list of rules
//	fail_mode: closed        # optional: error | open | closed
//	subjects:
//	  app-1-order.create:
//	    - {name: qps, rate: 10, period: 1s}
//	    - {name: qpd, rate: 1000, period: 1d}
//
// The same rules in a Redis hash, one field per subject (RedisHash):
//
//	HSET allRateLimitConfigs app-1-order.create '[{"name":"qps","rate":10,"period":"1s"},{"name":"qpd","rate":1000,"period":"1d"}]'
//
// Hot reload: Watch polls the source every interval (WithInterval) and
// swaps the rules in memory; Reload does it at once, for callers that learn
// of changes otherwise (their own pub/sub subscriber: pub/sub is not part
// of the store contract). Reloading writes nothing to Redis. A counter is
// named after its rule's Name (or its period when unnamed), so give rules
// stable names: changing a rule's rate keeps its window's count; renaming
// it starts a new counter.
package rules
