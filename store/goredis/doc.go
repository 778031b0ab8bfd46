// Package goredis adapts a go-redis v9 client (redis.UniversalClient:
// *redis.Client, *redis.ClusterClient, *redis.Ring, a failover client) to
// store.Store and store.Watcher.
//
// A decision is never counted twice. go-redis retries a command whose
// connection dropped (MaxRetries, 3 by default), which would run a rate
// limiting script a second time after a lost reply. The adapter marks every
// command it sends with an argument that refuses to be written twice: a
// retry of a command already written fails before it reaches the wire, and
// the caller gets an error wrapping store.ErrUnknownOutcome. Any network or
// context error after a command was written is reported the same way, since
// the server may have run it.
//
// Recommended client options for a limiter:
//
//	rdb := redis.NewClient(&redis.Options{
//		Addr:         addr,
//		MaxRetries:            -1,   // no retries: nothing to guard
//		ContextTimeoutEnabled: true, // honour limiter.WithTimeout
//		DialTimeout:  time.Second,
//		ReadTimeout:  200 * time.Millisecond, // a dead Redis costs at most this
//		WriteTimeout: 200 * time.Millisecond,
//	})
//	st := goredis.New(rdb)
//
// With the defaults the guarantee holds too; MaxRetries: -1 only saves the
// futile retry.
//
// Deadlines: go-redis ignores a context's deadline unless
// ContextTimeoutEnabled is set, and waits for its ReadTimeout (3 s by
// default) instead. When the client does not set it, the adapter enforces
// the deadline itself: it waits for the reply on another goroutine and gives
// up at the deadline, with an error wrapping context.DeadlineExceeded and
// store.ErrUnknownOutcome. Setting ContextTimeoutEnabled: true avoids that
// goroutine per call whose context has a deadline (limiter.WithTimeout gives
// every call one). go-redis does not see a context's cancellation either: a
// call whose context can be cancelled but has no deadline (an HTTP
// request's) is bounded by the adapter in any case, and one cancelled
// before its deadline ends at that deadline at the latest. A command is
// written once, except after a reply that refused it without running it:
// a ClusterClient's redirections (MOVED, ASK: a slot moved or moving to
// another node), which it follows, and READONLY, LOADING, CLUSTERDOWN and
// MASTERDOWN, which a ClusterClient sends again up to MaxRedirects times
// whatever MaxRetries says; the last refusal is the call's error, not an
// unknown outcome. A Client (one server) retries those refusals as it
// retries a lost reply, without showing the adapter which it met, so the
// adapter refuses its second write as it must after a lost reply: a call
// refused with LOADING or READONLY ends as store.ErrUnknownOutcome, though
// it ran nothing. With MaxRetries -1 a Client returns the refusal itself. A command refused with TRYAGAIN (its keys split by a slot's
// migration) is not sent again by go-redis: its error is
// store.ErrTryAgain, on which store.Script and limiter.AllowMany send it
// again after a pause. A ClusterClient's transaction (MULTI ... EXEC in one
// Do) goes through its TxPipeline, which follows MOVED and ASK (ASKING
// before MULTI) and sends it again only when the node refused it whole,
// never after a lost reply; a TRYAGAIN it gives up on is
// store.ErrTryAgain. Watch on a ClusterClient follows a MOVED or ASK
// itself when go-redis's Watch runs out of redirections (it sends a
// WATCH the source refused with ASK to the target without ASKING): to the
// slot's target, ASKING before the WATCH, each later command and the
// transaction. A transaction, or a read, refused because the keys' slot
// moved since the WATCH (a failover, a migration) ran nothing and is
// store.ErrTxAborted. go-redis's Watch follows a MOVED without updating its
// slot map; the adapter then has the client read the map again, so that
// later Watches of the slot go to its new node at once, not after the
// client's next reload (ClusterStateReloadInterval). A command that go-redis would send again after its
// reply was lost fails instead, with ErrUnknownOutcome. Likewise a
// ReadTimeout or WriteTimeout of -2 (no socket deadlines) keeps go-redis
// from seeing a context's deadline even with ContextTimeoutEnabled: the
// adapter then bounds every call itself. A
// call given up on before its commands were written is not an unknown
// outcome: its commands are sealed and will never be sent. Such an error,
// and one from go-redis's own deadline while it retries a dial, keeps the
// client's last failure to connect (refused, a certificate) in its chain:
// New adds a dial hook to the client (once per client) to remember it. On
// a ClusterClient the hook also has the client read the slot map again
// when a dial fails: a master that died sends no MOVED, and go-redis would
// otherwise keep sending its slots' calls to it until its next periodic
// reload (ClusterStateReloadInterval, a minute by default), long after a
// replica took over.
//
// Batches (store.Batcher, which limiter.AllowMany uses) on a ClusterClient
// go in one pipeline per node, the nodes in parallel, so that a node that
// fails or stays silent fails only its own commands. A ClusterClient sends
// a node's whole pipeline again when its first reply is a refusal it
// retries (CLUSTERDOWN, from a node given a command on a slot that no node
// serves): a command of a Batch or of a shared pipeline (below) whose reply
// was read before that keeps its reply (it is not sent twice). On a Ring
// they go in one go-redis pipeline: without ContextTimeoutEnabled, a
// silent shard fails the batch's commands on every shard as unknown
// outcomes. A transaction (MULTI ... EXEC, as Bucketed sends) goes whole
// to the Ring's shard of its first key, keyless commands such as TIME
// with it, as go-redis's Ring.Watch does; hooks added to the Ring itself
// do not see it, its shards' hooks do. The dial
// hook that keeps a connection failure's cause reaches the nodes a
// ClusterClient makes after New, and none of a Ring's shards.
//
// A Store on a *redis.Client says that one server holds every key
// (store.OneServer), and limiter.AllowMany then decides many subjects in
// one script call. Behind a proxy that spreads keys over servers (Envoy's
// Redis proxy, twemproxy), which routes a call by its first key, give New
// WithShardingProxy: each decision is then its own call, routed by its own
// keys.
//
// Shared pipelines: by default the script calls (decisions) of concurrent
// goroutines share round trips, on a *redis.Client and per master on a
// ClusterClient (once the client has its slot map: see
// WithSharedPipelines). At most DefaultSharedPipelines round trips are in
// flight at once; a call that finds them all out waits, with every call that
// arrives meanwhile, and when one returns they leave together in one
// pipeline, sent by the first of them. A lone caller never waits: it sends
// at once, as without sharing. Under load the client and the server make
// a system call per pipeline rather than per decision, so a busy process
// makes more decisions per second on the same CPU. Each call keeps its own
// deadline and outcome (a call whose context ends before its pipeline
// leaves is not sent), and go-redis's hooks see a shared pipeline as a
// pipeline, not as single commands. WithSharedPipelines(n) sets n;
// WithSharedPipelines(0) sends every call on a connection of its own.
//
// Auto-pipelining: WithAutoPipeline() sends single decisions through the
// client's AutoPipeliner (go-redis v9.22 and later; experimental there),
// so that the decisions of many goroutines share round trips: more
// decisions per second for a busy process, at the cost of a little latency
// for a lone caller. A decision is still never sent twice, and the adapter
// ends a queued call at its context's deadline itself.
//
//	st := goredis.New(rdb, goredis.WithAutoPipeline())
//
// TLS: use Dialer: TLSDialer(netDialer, tlsConfig) rather than TLSConfig,
// so that go-redis notices an idle TLS connection the server has closed
// (see TLSDialer).
package goredis
