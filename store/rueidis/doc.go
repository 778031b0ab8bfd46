// Package rueidis adapts a rueidis client (github.com/redis/rueidis:
// single server, Cluster, Sentinel — anything rueidis.NewClient returns)
// to store.Store and store.Watcher.
//
// Commands keep rueidis's auto-pipelining: a script call is one Client.Do,
// so concurrent decisions share connections and flushes; Store.Do is one
// Client.DoMulti. A script with integer arguments and reply
// (store.Int64sEvaler, used by store.Script.RunInt64s and so by every
// FixedWindow decision) passes its arguments as text remembered per value
// (a limit's rate and period are formatted once, not per call) and reads
// the reply's integers straight from rueidis's message into the caller's
// buffer: a decision allocates less than a hand-written EVALSHA.
//
// # A decision is never counted twice
//
// rueidis re-sends a command after a network error only when the command
// is marked retryable (read-only commands, or ones built with ToRetryable):
// every retry loop tests Completed.IsRetryable first (client.go: Do, DoMulti
// and the dedicated client; cluster.go: do, doresultfn and the dedicated
// client; sentinel.go: Do, DoMulti). This adapter builds every command,
// EVALSHA and EVAL included, with Builder.Arbitrary and never marks one, so
// with rueidis's defaults a written EVALSHA is never re-sent, whatever
// DisableRetry says. (rueidis.NewLuaScriptRetryable, by contrast, marks its
// EVALSHA retryable and would run a script twice after a lost reply; the
// adapter does not use rueidis.Lua: store.Script does the NOSCRIPT
// fallback.) Any error other than the server's reply — a dropped
// connection, a timeout, a cancelled context — wraps store.ErrUnknownOutcome,
// since the command may have run; only a context already done before the
// call and the errors rueidis returns before writing (a failed dial, a
// recycled dedicated client) do not.
//
// Re-sends that remain, and why they are safe or avoided:
//
//   - Cluster MOVED and ASK redirections (cluster.go, Client.do and
//     doresultfn): the node that answered MOVED or ASK did not run the
//     command.
//   - ConnLifetime: when a connection has outlived ConnLifetime, rueidis
//     re-sends commands answered with its internal "connection is expired"
//     error whether or not they are retryable (client.go, singleClient.Do
//     and DoMulti; the same in cluster.go and sentinel.go), and a command
//     already written on such a connection gets that error when the
//     connection breaks before its reply (pipe.go, _backgroundRead). Leave
//     ConnLifetime at 0, its default.
//   - Standalone.EnableRedirect (Valkey's CLIENT CAPA redirect, off by
//     default) re-sends a whole DoMulti when one of its replies is REDIRECT
//     (standalone.go, DoMulti). Leave it off.
//
// # Recommended client options
//
//	c, err := rueidis.NewClient(rueidis.ClientOption{
//		InitAddress:       []string{addr},
//		DisableCache:      true, // the adapter never reads through the client-side cache
//		AlwaysPipelining:  true, // notice a closed connection before writing into it
//		PipelineMultiplex: -1,   // one connection per node, dialled by NewClient
//		ForceSingleClient: true, // a single server (not for a Cluster)
//	})
//	st := rueidisstore.New(c) // import this package as rueidisstore, say
//	lim, err := limiter.New(st, strategy.NewFixedWindow(), limiter.WithTimeout(200*time.Millisecond))
//
// None of them is needed for the guarantee above; they make failures and
// recoveries predictable:
//
// DisableCache: rueidis enables server-assisted client-side caching by
// default, which sends CLIENT TRACKING on every connection. The adapter
// never uses DoCache, so tracking only costs; servers without it (miniredis,
// Redis before 6, some proxies) refuse the connection unless it is off.
//
// AlwaysPipelining: rueidis runs a connection used by one caller at a time
// without a reader goroutine (until the first concurrent or cancellable
// call), so a connection the server has closed — a restart, a failover, an
// idle timeout — is only found out when the next command is written into it.
// That command's outcome is unknown from the client's side, and the adapter
// must report store.ErrUnknownOutcome for it although it never ran. With
// AlwaysPipelining every connection has a reader from the start, sees the
// close when it happens and is replaced before the next command, so a
// restart is invisible. Under concurrent load rueidis runs this way anyway;
// it costs nothing measurable. One narrow window remains: when a connection
// breaks, rueidis hands the waiting call its error just before it marks the
// connection broken (pipe.go: _backgroundRead's deferred reply, then
// _exit), so a call made in that instant still picks the dead connection
// and fails, unsent, with the same error. The adapter cannot tell that from
// a lost reply and reports store.ErrUnknownOutcome; the next call gets a
// new connection. The conformance suite's fault checks (properties 8 and
// 19) allow one such call, when their proxy saw nothing of it.
//
// PipelineMultiplex -1: a single-server client otherwise spreads commands at
// random over up to 4 connections (by GOMAXPROCS) and dials each lazily, on
// the first command that picks it, inside that command's deadline: a slow
// handshake then fails a decision that never reached Redis. One connection,
// dialled by NewClient, carries all decisions with rueidis's
// auto-pipelining; in this package's benchmarks it was as fast or faster.
// A Cluster client uses one connection per node by default.
//
// ForceSingleClient: with one InitAddress, rueidis probes the server with
// CLUSTER SLOTS on connecting and becomes a Cluster client when it answers.
// miniredis answers with its own address, so a client dialled through a
// proxy would go around it. Set it for a single server; leave it unset for a
// Cluster (several InitAddress entries).
//
// Deadlines: rueidis honours the context's deadline (limiter.WithTimeout),
// and a call cut short by it wraps context.DeadlineExceeded and
// store.ErrUnknownOutcome. ConnWriteTimeout (10 s by default) bounds how long
// a silent server holds a connection that no deadline covers.
//
// Leave DisableRetry, RetryDelay, ConnLifetime and Standalone.EnableRedirect
// at their defaults.
//
// # Cluster
//
// The adapter routes a command by its first key: for EVALSHA and EVAL the
// first of keys; for Store.Do the command's first argument, or the argument
// its syntax puts the key in (EVAL's keys after numkeys, OBJECT ENCODING
// key, ...), and no key for SCAN, SCRIPT, PING and other server commands.
// The other keys are sent as plain arguments: the store contract puts all
// keys of a call in one slot, and a call that breaks it gets the server's
// CROSSSLOT error reply rather than a panic in rueidis's builder.
//
// # Watch
//
// Watch pins a dedicated connection (Client.Dedicate) and sends WATCH on
// it; Tx.Do pipelines commands on it, Tx.Exec sends MULTI, the commands and
// EXEC in one round trip, and a nil EXEC reply is store.ErrTxAborted. A
// dedicated connection keeps its WATCH when it goes back to rueidis's pool,
// and the next transaction on it would abort, so on every way out of Watch —
// fn's error, a panic, a lost connection, the context — the adapter sends
// UNWATCH (unless EXEC already cleared the watch) or closes the connection
// when it cannot be sure. Tx.Do and Tx.Exec refuse MULTI, EXEC and DISCARD,
// and on a Cluster commands whose key is not in the watched keys' slot.
// A WATCH that fails on a connection the server has closed is tried once
// more on a new one. rueidis dials a new dedicated connection of a
// single-server client without the caller's context; Watch still returns at
// the context's deadline and lets the dial finish in the background.
//
// A server held by another client's long script answers BUSY. rueidis
// (v1.0.79) sends UNSUBSCRIBE on a dedicated connection handed back to its
// pool, and panics, ending the process, when the server answers that with
// a BUSY error. So once the server has answered BUSY, Watch closes its
// dedicated connections instead of handing them back, for 10 s after the
// last BUSY it saw: during a BUSY spell each Watch dials a connection of
// its own. A connection handed back in the very instant a script begins
// to hold the server can still meet it; that race is rueidis's to close.
// Calls during BUSY fail with the server's error, which names BUSY.
//
// A connection whose set-up the server refuses (a password changed on the
// server, an ACL user disabled) fails its calls with the server's error,
// not store.ErrUnknownOutcome: nothing of theirs was sent. One exception:
// with AuthCredentialsFn and a credential refresh (RefreshAfter), rueidis
// hands a refused re-AUTH's error to the calls already written on that
// connection, which may have run; leave the refresh off where a lost
// reply must be told apart.
package rueidis
