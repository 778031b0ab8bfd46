// Package redigo adapts a redigo connection pool (github.com/gomodule/redigo,
// *redis.Pool) or a Redis Cluster (github.com/mna/redisc, through Cluster)
// to store.Store and store.Watcher.
//
// Every call takes one connection from the pool, sends its commands in one
// round trip (Send each, then flush and read every reply), and closes the
// connection, which returns it to the pool.
//
// Shared pipelines: by default the script calls (decisions) of concurrent
// goroutines share round trips, on one server and per master of a Cluster
// (once the Store has read which master serves each slot). At most
// DefaultSharedPipelines round trips are in flight; a call that finds them
// all out waits, with every call that arrives meanwhile, and when one
// returns they leave together, pipelined on one connection, sent by the
// first of them. A lone caller never waits. Each call keeps its own
// deadline and outcome: one whose context ends before its pipeline is
// written is left out of it (a known outcome). WithSharedPipelines(n)
// sets n; WithSharedPipelines(0) gives every call a connection of its own.
//
// # Recommended pool settings
//
//	nd := &net.Dialer{Timeout: time.Second, KeepAlive: time.Minute} // connect timeout
//	pool := &redis.Pool{
//		DialContext: func(ctx context.Context) (redis.Conn, error) {
//			return redigo.Dial(ctx, nd, "tcp", addr,
//				redis.DialReadTimeout(200*time.Millisecond), // a dead Redis costs at most this
//				redis.DialWriteTimeout(200*time.Millisecond))
//		},
//		TestOnBorrow: redigo.TestOnBorrow, // drop connections the server closed
//		MaxActive:    64,                  // at least the concurrent callers
//		MaxIdle:      64,                  // = MaxActive: redigo closes returns beyond MaxIdle (default 0!)
//		Wait:         true,                // callers queue for a connection, bounded by their ctx
//		IdleTimeout:  4 * time.Minute,     // below the server's timeout setting
//	}
//	st := redigo.New(pool)
//
// Dial and TestOnBorrow matter for restarts and failovers. After a restart
// every idle connection in the pool is dead, and redigo only finds out by
// writing a command and reading EOF, when the command may or may not have run:
// the call fails with store.ErrUnknownOutcome. TestOnBorrow looks at the
// idle socket without blocking (one system call, no round trip) and rejects
// a connection the server has closed before anything is written; the pool
// then dials a fresh one. A PING in TestOnBorrow would do too, at the cost
// of a round trip per call. Dial makes the TCP connection itself so that
// TestOnBorrow can reach it; set the connect timeout and keep-alive on its
// net.Dialer, not with redis.DialConnectTimeout or redis.DialKeepAlive.
//
// # Deadlines
//
// A call honours its context. On a redigo connection the adapter uses
// redis.ConnWithContext (DoContext): the call returns at min(ctx's deadline,
// DialReadTimeout), or when ctx is cancelled, with an error that wraps
// ctx's error (context.DeadlineExceeded) and, once a command was written,
// store.ErrUnknownOutcome. The connection is then closed and the pool
// discards it, so a late reply is never read by the next call. A context
// without Done (context.Background) costs nothing; one with a deadline
// costs redigo's goroutine per round trip. A redisc connection has only
// redis.ConnWithTimeout: the time left before ctx's deadline becomes the
// read timeout of the call (in place of DialReadTimeout), and a
// cancellation without deadline is noticed at the read timeout.
//
// # A decision is never counted twice
//
// When the reply to a written command is lost (connection cut, read timeout,
// context deadline) the call fails with an error wrapping
// store.ErrUnknownOutcome: the server may have run it. Nothing re-sends it:
//
//   - redigo does not retry. In redis/conn.go, conn.DoWithTimeout (behind Do,
//     DoContext and the pipelined Do("")) writes, flushes and reads once; any
//     I/O error goes through conn.fatal, which records it, closes the socket
//     and returns it. Send, Flush and ReceiveWithTimeout do the same. No code
//     path writes a command twice or dials again.
//   - redis.Pool does not retry either: the only loop in Pool.GetContext tries
//     idle connections (TestOnBorrow, MaxConnLifetime) before one is handed
//     out, so before anything is written. activeConn.Close returns a
//     connection to the pool only when its Err() is nil (put with forceClose
//     otherwise), so a connection that failed is discarded.
//   - redisc retries only inside RetryConn, which this package does not use;
//     redisc.Conn's Do, Send and Receive pass through to one node
//     connection.
//   - This package re-sends a call only on a Cluster, and only when every
//     reply of the call was a MOVED or ASK refusal: a node that answers
//     so did not run the command. (A TRYAGAIN refusal is the call's
//     store.ErrTryAgain: store.Script sends the call again after a pause.) Never after an error that is
//     not a reply.
//
// The conformance suite checks it (property 19): it drops the reply to
// EVALSHA in a proxy and requires ErrUnknownOutcome and a counter of 1.
//
// # One server or a proxy
//
// A Store on a pool that is not a Cluster says that one server holds every key
// (store.OneServer), and limiter.AllowMany then decides many subjects in
// one script call. Behind a proxy that spreads keys over servers (Envoy's
// Redis proxy, twemproxy), which routes a call by its first key, give New
// WithShardingProxy: each decision is then its own call, routed by its own
// keys.
//
// # Redis Cluster
//
//	cluster := &redisc.Cluster{
//		StartupNodes: addrs,
//		DialOptions:  []redis.DialOption{redis.DialConnectTimeout(time.Second),
//			redis.DialReadTimeout(200 * time.Millisecond), redis.DialWriteTimeout(200 * time.Millisecond)},
//		CreatePool: func(addr string, opts ...redis.DialOption) (*redis.Pool, error) {
//			return &redis.Pool{ // as above, per node
//				DialContext: func(ctx context.Context) (redis.Conn, error) {
//					return redigo.Dial(ctx, nd, "tcp", addr, opts...)
//				},
//				TestOnBorrow: redigo.TestOnBorrow,
//				MaxActive: 64, MaxIdle: 64, Wait: true, IdleTimeout: 4 * time.Minute,
//			}, nil
//		},
//		PoolWaitTime: 200 * time.Millisecond, // bounds the wait for a node's connection
//	}
//	if err := cluster.Refresh(); err != nil { ... } // load the slot map once
//	st := redigo.New(redigo.Cluster(cluster))
//
// The Store binds each call's connection (redisc.Conn.Bind) to the node of
// the call's first key, so a whole pipeline, script or transaction goes to
// one node; the keys of one call share a slot (strategies tag them with the
// subject). A MOVED reply updates redisc's slot map and the call is sent
// again to the new owner (dialled directly after a second MOVED to it:
// redisc binds a call whose node it cannot reach to another node, so that a
// dead master's calls would only meet MOVED again; dialled, they fail as a
// refused connection, sent nowhere); ASK sends it to the importing node,
// each command preceded by ASKING, on a connection dialled with
// cluster.DialOptions (not through CreatePool: put a password or TLS
// settings in DialOptions, or calls on a slot being migrated fail until the
// migration ends). At most three re-sends per call, and only when every
// reply was such a refusal; a transaction (MULTI ... EXEC in one Do) is
// redirected whole when the node refused the commands it would not queue
// (EXECABORT), with one ASKING before its MULTI after an ASK (the server
// keeps ASKING's leave for what MULTI queues). A call refused with
// TRYAGAIN (its keys split by
// the migration) fails with store.ErrTryAgain, on which store.Script and
// limiter.AllowMany send it again after a pause, with three redirections of
// its own to follow. Without CreatePool redisc dials a connection per call.
//
// # Transactions
//
// Watch pins one pooled connection (on a Cluster, bound to the node of the
// first key) for WATCH, the reads of Tx.Do and the MULTI/EXEC of Tx.Exec. On
// every way out of Watch, panics included, the connection is un-watched
// (UNWATCH, unless an EXEC already did it) before it returns to the pool, or
// discarded when it failed or the UNWATCH cannot be sent in time. A nil EXEC
// reply is store.ErrTxAborted. A WATCH the source of a slot in migration
// refuses with ASK is sent to the target after ASKING, on a connection
// dialled to it, where every later command and transaction goes after
// ASKING too; a transaction refused because the keys' slot moved since
// the WATCH (MOVED, ASK or TRYAGAIN for its commands) ran nothing and is
// store.ErrTxAborted, so that the strategy watches the keys again, and so
// are reads refused for that reason (a failover, a migration).
//
// # Replies
//
// Bulk strings ([]byte) become string, integers stay int64, arrays become
// []any (recursively), a nil reply is store.ErrNil, a Redis error reply is
// that command's Reply.Err (NOSCRIPT wraps store.ErrNoScript). Errors are
// prefixed "redigo: " and wrap the client's error once.
package redigo
