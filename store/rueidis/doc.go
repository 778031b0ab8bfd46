// Package rueidis adapts a rueidis client (github.com/redis/rueidis: single
// server, Cluster or Sentinel, anything rueidis.NewClient returns) to
// store.Store and store.Watcher. Commands keep rueidis's auto-pipelining.
//
// Recommended client options:
//
//	c, err := rueidis.NewClient(rueidis.ClientOption{
//		InitAddress:       []string{addr},
//		DisableCache:      true, // the adapter never reads through the client-side cache
//		AlwaysPipelining:  true, // notice a closed connection before writing into it
//		PipelineMultiplex: -1,   // one connection per node, dialled by NewClient
//		ForceSingleClient: true, // a single server (not for a Cluster)
//		// no background PING (see below); TCP keep-alive probes instead
//		Dialer: net.Dialer{KeepAlive: -1, KeepAliveConfig: net.KeepAliveConfig{Enable: true}},
//	})
//	st := rueidisstore.New(c) // import this package as rueidisstore, say
//	defer c.Close()
//	defer st.Close() // before the client: see Watch below
//	lim, err := limiter.New(st, strategy.NewFixedWindow(), limiter.WithTimeout(200*time.Millisecond))
//
// None of them is needed for the guarantees below; they make failures and
// recoveries predictable. The Dialer turns off rueidis's background PING
// of idle connections (every Dialer.KeepAlive, a second by default): in
// rueidis v1.0.79 and v1.0.80 its timer starts before a new connection's
// reader and writer do (with AlwaysPipelining, or client-side caching on),
// so when the goroutine setting the connection up stalls that long, the
// PING is written and read beside them, and the reader panics ("protocol
// bug, message handled out of order"), ending the process. It was seen on
// a loaded machine. Without the PING, TCP keep-alive probes still find a
// dead idle connection, and a call's deadline (limiter.WithTimeout) still
// bounds every call. Servers without CLIENT TRACKING (miniredis, Redis
// before 6, some proxies) need DisableCache. For a Cluster, leave
// ForceSingleClient unset and give several InitAddress entries; the keys of
// one call must share a slot (the store contract), else the server replies
// CROSSSLOT.
//
// MaxFlushDelay (0 by default: rueidis writes what is queued as soon as
// nothing more is) changes no guarantee either. On a busy machine each
// write costs about as much CPU as the rest of a call, so with many
// concurrent calls per client a delay of 10–20 µs, which makes each write
// carry more calls, raised decisions per second by 40–60 % on a 2-core
// machine at 64 callers, and lowered them by 15–36 % at 16
// (limiter bench -rueidis-flush-delay measures it against your server).
//
// A Store on a client that is not a Cluster client says that one server holds every key
// (store.OneServer), and limiter.AllowMany then decides many subjects in
// one script call. Behind a proxy that spreads keys over servers (Envoy's
// Redis proxy, twemproxy), which routes a call by its first key, give New
// WithShardingProxy: each decision is then its own call, routed by its own
// keys.
//
// # Guarantees
//
// With rueidis's defaults a decision is never counted twice: the adapter
// marks no command retryable, so rueidis re-sends one only to follow a
// Cluster MOVED or ASK redirection, which the redirecting node did not run.
// Any error once a command may have been written (a dropped connection, a
// timeout, a cancelled context) wraps store.ErrUnknownOutcome, and a call
// cut short by the context's deadline also wraps context.DeadlineExceeded.
// Errors before anything is sent (a context already done, a failed dial, a
// connection set-up the server refuses) do not. Rarely, a call made as its
// connection breaks reports store.ErrUnknownOutcome though it was not sent.
//
// Leave DisableRetry, RetryDelay, ConnLifetime and Standalone.EnableRedirect
// at their defaults: a non-zero ConnLifetime or EnableRedirect makes rueidis
// re-send commands. With AuthCredentialsFn and a credential refresh
// (RefreshAfter), a refused re-AUTH fails calls already written with the
// server's error, not store.ErrUnknownOutcome, though they may have run:
// leave the refresh off where a lost reply must be told apart.
//
// Watch pins a dedicated connection; a nil EXEC reply is store.ErrTxAborted,
// and no connection is used again still watching keys. Tx.Do and Tx.Exec
// refuse MULTI, EXEC and DISCARD (and, on a Cluster, keys outside the
// watched keys' slot). Calls during BUSY fail with the server's BUSY error.
//
// rueidis v1.0.79 panics, ending the process, when a dedicated connection
// handed back to its pool meets a server that answers BUSY (another
// client's script holds it): the commands it sends on hand-back are all
// refused, and it matches their replies wrongly. So a Store never hands
// one back: it keeps those it has finished with for the next Watch, per
// server (unused for 30 s, one is closed; at most as many as were in use
// at once, and at most 1024 or WithWatchConns), and a Watch waiting for
// rueidis to make one takes the first another Watch finishes with. Kept
// connections hold slots of the client's BlockingPoolSize (1024 by
// default, per node), which its blocking commands (BLPOP, XREAD BLOCK)
// share: with a small pool, keep fewer (WithWatchConns(0): each Watch
// dials). Call Close before closing the client, to close those it keeps
// (a kept connection outlives the client otherwise, and a Watch on it
// still works).
//
// On a Cluster, Watch takes its connections from each node's client
// (Client.Nodes), not the Cluster client's dedicated ones, which are
// pinned to one slot, and learns which node serves a slot from the MOVED
// a node answers to a WATCH of a key it does not serve: the first Watch of
// a slot may take one more round trip, and a Watch after a slot moved
// follows the MOVED (each WATCH goes with a READWRITE: a READONLY replica
// connection, of a client that reads from replicas, would take the WATCH
// and refuse its EXEC). A WATCH of keys a slot's migration has split between
// two nodes (TRYAGAIN, which ran nothing) is sent again after a pause (as
// store.Script does) until the rest has moved; one answered with ASK (the
// key has moved, the slot not yet) goes to the slot's target after
// ASKING, as does every later read and transaction of that Watch (the
// target is not learned as the slot's owner). A transaction, or a read,
// refused because the keys' slot moved since the WATCH (a failover, a
// migration) ran nothing and is store.ErrTxAborted. A MOVED
// to a node that joined after the client read the slots makes rueidis
// learn the node (a read of the key through the client follows it); one
// to a node rueidis does not list yet (a master demoted by a failover and
// promoted again, listed at rueidis's next refresh, within a second or
// so) makes the Watch pause for it, about 2 s at most.
package rueidis
