// Package store is the driver side of limiter: the small contract a Redis
// client adapter implements, and the pieces written once for every adapter.
//
// A Store moves commands and scripts to Redis and maps errors; it decides
// nothing. Strategies (package strategy) are written against it, so one
// strategy runs unchanged on go-redis, rueidis and redigo, on a single server
// or a Cluster.
//
// The contract, in the spirit of database/sql/driver:
//
//   - Do sends commands in one round trip and returns one Reply per command.
//     A Redis error reply to one command is that Reply's Err; an error for the
//     round trip as a whole (connection, timeout, context) is Do's error.
//   - EvalSha and Eval run a script. Script.Run calls EvalSha and falls back to
//     Eval when the server answers NOSCRIPT, so adapters never implement the
//     fallback themselves. Likewise a Cluster's TRYAGAIN (a call on keys
//     that a slot's migration has split between two nodes, refused without
//     running) is mapped to ErrTryAgain, and Script.Run sends the call again
//     after a pause (TryAgainPause) until the migration has moved the rest;
//     DoAgain does the same for a single command.
//   - Watcher is optional: a store that can pin one connection for
//     WATCH/MULTI/EXEC implements it. Strategies that need it check for it
//     with a type assertion and report a clear error when it is missing.
//   - Int64sEvaler is optional: a store that can run a script with integer
//     arguments and reply without boxing them implements it, and
//     Script.RunInt64s uses it (every FixedWindow decision does); other
//     stores get the same calls through EvalSha and Eval.
//   - Batcher is optional: a store that can send independent commands of
//     many slots in one pipeline per server implements it, and
//     Limiter.AllowMany sends a batch of decisions through it; without it
//     the decisions are made one call each, concurrently.
//   - OneServer is optional: a store that reaches one server (no Cluster,
//     no proxy spreading keys over servers) says so, and Limiter.AllowMany
//     then decides many subjects in one script call. Every adapter of this
//     module implements it and has WithShardingProxy for a proxy the
//     client cannot see.
//   - A store keeps none of the slices a call gives it (keys, arguments,
//     commands, dst) once the call has returned: callers reuse them.
//   - Replies are normalised: integers to int64, bulk and simple strings to
//     string, arrays to []any, a nil reply to ErrNil; an error reply inside
//     an array (EXEC's, a script's table) is an error element. The helpers
//     Int64, String and Slice convert them with checked type assertions (an
//     error element is their error, wrapped); AppendInt64s keeps an error
//     element's message, not its identity (a NOSCRIPT element is not the
//     call's NOSCRIPT).
//   - A Cluster adapter routes a command by its first key: Cmd.Key and
//     KeyIndex name it (the key after numkeys for EVAL and EVALSHA, none for
//     PING or TIME).
//
// The rule that matters most: a Store must never let one call run twice on
// the server. If the command was written and the reply was lost, the adapter
// returns an error that wraps ErrUnknownOutcome; it does not retry. Like
// database/sql/driver.ErrBadConn, ErrUnknownOutcome is the contract that tells
// the caller the server may have performed the operation.
package store
