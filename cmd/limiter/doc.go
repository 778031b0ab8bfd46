// Command limiter runs the conformance suite of the limiter framework
// against a Redis and prints a pass/fail table, benchmarks the adapters
// against their clients' own EVALSHA, and serves a demo HTTP service
// limited by rules.
//
// Usage:
//
//	limiter check [flags]
//
// With no flags, check runs every check for every strategy and every store
// adapter (go-redis, rueidis, redigo) on an embedded miniredis, a fresh one
// per check, and exits 1 if any check fails. On a Redis of yours (-redis,
// -cluster) it first prints the server's report (limiter.CheckServer): its
// version, mode, role, eviction policy, whether scripts may run and which
// strategies can run there (the checks of the others skip, saying why),
// with a warning for what can make a limit fail; when the server cannot be
// used at all (refused, a certificate not trusted, a wrong password, a
// replica, a Cluster node given to -redis) it says why and exits 1. Every check is
// bounded (5 min): one that hangs fails saying so. Flags:
//
//	-redis URL     run on the Redis at URL (redis://[user:pass@]host:port/db)
//	               instead; the suite touches only keys under its own random
//	               prefix, deletes them afterwards, and never flushes or
//	               restarts the server (the checks that need to are skipped);
//	               unix:///path/to/redis.sock[?db=N] for a Unix socket,
//	               or rediss://... for TLS, with:
//	-tls-ca FILE   the CA that signed the server's certificate (PEM)
//	-tls-cert FILE, -tls-key FILE
//	               a client certificate and its key (PEM)
//	-tls-insecure  do not verify the server's certificate (testing only)
//	               (over TLS the fault-proxy checks are skipped: a proxy
//	               cannot see inside TLS without the server's key)
//	-cluster ADDRS run on the Redis Cluster of the nodes at ADDRS
//	               (host:port,host:port,...; one is enough: keys are
//	               scanned on every master CLUSTER NODES lists), shared
//	               like -redis; a node given as
//	               redis://[user:password@]host:port (rediss:// for TLS)
//	               gives the user, password and TLS of every node; the
//	               fault-proxy checks are skipped (a Cluster client goes
//	               around a proxy)
//	-checks LIST   comma-separated check names, of the strategies' checks
//	               (period-change) or of the store contract's
//	               (replies-normalised); default: all. With -known-bad
//	               only the controls that must fail a selected check run.
//	-known-bad     also run the known-bad implementations (hand-written
//	               designs with their bugs); they are expected to fail,
//	               and do not change the exit status unless one of them
//	               passes a check it must fail, or fails it only because
//	               its harness did (its server could not be reached: the
//	               control showed nothing)
//	-json          print the results as one JSON object (the header goes
//	               to stderr); "checks" counts the rows the run was to
//	               report, "interrupted" is true when Ctrl-C stopped it
//	-v             print every check's messages, not only failures'
//
// Exit status: 0 when every check passed or was skipped and at least one
// ran, 1 when one failed or every one selected was skipped (nothing was
// verified), 2 for a usage error. A usage error is found before any
// connection: among others, an empty -redis or -cluster (an unset shell
// variable; leave the flag out for the embedded miniredis), or a port
// outside 1 to 65535, in every command.
//
//	limiter bench [-redis URL] [-tls-ca FILE] [-tls-cert FILE -tls-key FILE]
//	              [-tls-insecure] [-adapters goredis,rueidis,redigo]
//	              [-strategies fixedwindow,gcra,...] [-workloads admit,deny,hot,many]
//	              [-callers 1,16,64] [-rounds 6] [-round 250ms] [-allocs 5000]
//	              [-rueidis-flush-delay 20us] [-json] [-svg FILE]
//
// bench measures, for each strategy (fixedwindow, alignedwindow, gcra,
// tokenbucket, slidingwindow, slidinglog), workload (admit: every call admitted, 4
// subjects per caller; deny: every call denied; hot: every caller on one
// subject; many: each call decides 16 subjects, by one AllowMany against
// the client's own pipeline of 16 EVALSHAs (for alignedwindow each key
// followed by the window the app's clock plus its offset names, and the
// calls the server answers with another window sent again in another
// pipeline); its rates count every decision, its latencies are of whole
// calls) and adapter, decisions per second through the Limiter and
// through the client's own hand-written EVALSHA of the strategy's script on
// the same keys (the key concatenated per call, the arguments put in the
// client's form once, as a hand-written caller does), with exactly N concurrent callers per level, in rounds that
// alternate the two (so drift cancels), and prints both rates, their ratio
// over all rounds, the median and range of the per-round ratios, the
// Limiter's p50 and p99 latency, and the allocations per decision of each
// (one caller, -allocs decisions one after another). On the embedded miniredis (the
// default) the server runs in the same process, so only the client side is compared
// and the allocations include the server's; point -redis at a real server,
// ideally on another machine, for numbers that mean something. It writes
// only keys under limiter-bench: and deletes them afterwards; Ctrl-C stops
// the running measurement, deletes its keys and exits 1 (a second Ctrl-C
// stops it at once).
// -rueidis-flush-delay sets the rueidis client's MaxFlushDelay (default 0,
// rueidis's default) for the raw calls and the Limiter's alike: with many
// concurrent callers per client a delay of tens of microseconds makes each
// write carry more calls, with few it adds latency.
//
//	limiter serve [-addr A] [-redis URL] [-rules FILE] [-hash KEY]
//	              [-interval D] [-fail-mode error|open|closed] [-prefix P]
//
// serve runs a demo HTTP service limited per <X-App-Key>-<path> by rules
// (an appkey-method; ip-<client IP>-<path> without an X-App-Key) with
// RateLimit headers and 429s. The rules come
// from a Redis hash (default allRateLimitConfigs, seeded from -rules or the
// demo rules) or from -rules alone, reloaded every -interval, on an embedded
// miniredis unless -redis is given. A fail_mode in the rules decides their
// requests; -fail-mode beside a different one is refused, at start-up and
// on every reload (the last good rules stay). GET /-/rules shows the rules
// in force, GET /-/stats the requests admitted, denied (those the rules'
// default decides alone among them), degraded and failed.
package main
