package rueidis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	rd "github.com/redis/rueidis"

	"github.com/quotagate/limiter/internal/argcache"
	"github.com/quotagate/limiter/store"
)

// Retry safety: notes for maintainers on how commands are built and which
// rueidis code paths could send one twice.
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
// Why the recommended client options (package doc). None of them is needed
// for the guarantee above; they make failures and recoveries predictable:
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
// Cluster routing: the adapter routes a command by its first key: for
// EVALSHA and EVAL the first of keys; for Store.Do the command's first
// argument, or the argument its syntax puts the key in (EVAL's keys after
// numkeys, OBJECT ENCODING key, ...), and no key for SCAN, SCRIPT, PING and
// other server commands. The other keys are sent as plain arguments: the
// store contract puts all keys of a call in one slot, and a call that breaks
// it gets the server's CROSSSLOT error reply rather than a panic in
// rueidis's builder.
//
// Refused connection set-up: a connection whose set-up the server refuses
// (a password changed on the server, an ACL user disabled) fails its calls
// with the server's error, not store.ErrUnknownOutcome: nothing of theirs
// was sent. One exception: with AuthCredentialsFn and a credential refresh
// (RefreshAfter), rueidis hands a refused re-AUTH's error to the calls
// already written on that connection, which may have run; leave the
// refresh off where a lost reply must be told apart.

// Store adapts a rueidis.Client. It is safe for concurrent use.
type Store struct {
	c     rd.Client
	texts argcache.Cache[string] // the text of recent integer arguments
	// proxy: WithShardingProxy was given.
	proxy bool
	// idle holds dedicated connections Watch has finished with, for the
	// next Watch (see watch.go): a client that is not a Cluster client's.
	idle idleConns
	// nodes holds them per node for a Cluster client (nil otherwise).
	nodes *clusterConns
}

var (
	_ store.Store        = (*Store)(nil)
	_ store.Watcher      = (*Store)(nil)
	_ store.Int64sEvaler = (*Store)(nil)
	_ store.OneServer    = (*Store)(nil)
)

// Option configures a Store.
type Option func(*Store)

// WithShardingProxy says that the client talks to a proxy that spreads
// keys over several servers by their hash slot or tag (Envoy's Redis
// proxy, twemproxy, a managed "cluster proxy") and routes a script call by
// its first key. Without it a Store on a client that is not a Cluster
// client reports that one server holds every key (store.OneServer), and
// limiter.AllowMany decides asks of different subjects in one script
// call, which such a proxy would send to one server only.
func WithShardingProxy() Option {
	return func(s *Store) { s.proxy = true }
}

// WithWatchConns sets the most dedicated connections Watch keeps for the
// next Watch, per server (on a Cluster, per node: 1024 by default,
// rueidis's default BlockingPoolSize; 0 keeps none, and each Watch dials
// one). A Store keeps no more than its Watches used at once, and closes
// one unused for 30 s. Kept connections count against the client's
// BlockingPoolSize, which its blocking commands (BLPOP, XREAD BLOCK) and
// Dedicate share: with a small pool, keep fewer. See Watch for why they
// are not handed back to the pool.
func WithWatchConns(n int) Option {
	return func(s *Store) { s.idle.max = max(n, 0) }
}

// New returns a Store on c, or nil when c is nil (limiter.New then reports
// limiter.ErrNilStore).
func New(c rd.Client, opts ...Option) *Store {
	if c == nil {
		return nil
	}
	s := &Store{c: c}
	s.idle.max = maxIdle
	for _, o := range opts {
		if o != nil { // an option chosen conditionally and left unset
			o(s)
		}
	}
	s.idle.dedicate = c.Dedicate
	if c.Mode() == rd.ClientModeCluster {
		s.nodes = newClusterConns(c, s.idle.max)
	}
	return s
}

// OneServer implements store.OneServer: true for a client that is not a
// Cluster client (a single server, or Sentinel's current master) unless
// WithShardingProxy was given.
func (s *Store) OneServer() bool {
	return !s.proxy && s.c.Mode() != rd.ClientModeCluster
}

// Client returns the wrapped client.
func (s *Store) Client() rd.Client { return s.c }

// EvalSha implements store.Store.
func (s *Store) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	return s.evalAny(ctx, "EVALSHA", sha, keys, args)
}

// Eval implements store.Store.
func (s *Store) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	return s.evalAny(ctx, "EVAL", src, keys, args)
}

func (s *Store) evalAny(ctx context.Context, name, script string, keys []string, args []any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("rueidis: %w", err) // nothing sent
	}
	var texts [16]string
	out := texts[:0]
	if len(args) > len(texts) {
		out = make([]string, 0, len(args))
	}
	r := s.c.Do(ctx, s.scriptCmd(name, script, keys, argTexts(args, out[:len(args)])))
	m, err := message(&r)
	if err != nil {
		return nil, err
	}
	return topValue(&m)
}

// EvalShaInt64s implements store.Int64sEvaler: the arguments are
// formatted into one string and the reply's integers are read straight
// from rueidis's message, with nothing boxed.
func (s *Store) EvalShaInt64s(ctx context.Context, sha string, keys []string, args []int64, dst []int64) ([]int64, error) {
	return s.evalInt64s(ctx, "EVALSHA", sha, keys, args, dst)
}

// EvalInt64s implements store.Int64sEvaler.
func (s *Store) EvalInt64s(ctx context.Context, src string, keys []string, args []int64, dst []int64) ([]int64, error) {
	return s.evalInt64s(ctx, "EVAL", src, keys, args, dst)
}

// evalInt64s runs a script with integer arguments and reply. Its frame, on
// the stack for the whole round trip, is kept small: the command is built,
// and errors are made, out of line. With many concurrent callers, each
// one's stack footprint costs throughput: a goroutine resuming after its
// reply touches its frames anew, and they are no longer in the CPU's
// cache.
func (s *Store) evalInt64s(ctx context.Context, name, script string, keys []string, args []int64, dst []int64) ([]int64, error) {
	var texts [8]string
	cmd, err := s.intsCmd(ctx, name, script, keys, args, texts[:0])
	if err != nil {
		return nil, err
	}
	r := s.c.Do(ctx, cmd)
	return appendInts(dst, &r)
}

// intsCmd builds a script call with integer arguments, their text in
// texts when it has room; a done ctx is an error, nothing built.
//
//go:noinline
func (s *Store) intsCmd(ctx context.Context, name, script string, keys []string, args []int64, texts []string) (rd.Completed, error) {
	if err := ctx.Err(); err != nil {
		return rd.Completed{}, fmt.Errorf("rueidis: %w", err) // nothing sent
	}
	if len(args) > cap(texts) {
		texts = make([]string, 0, len(args))
	}
	return s.scriptCmd(name, script, keys, intTexts(&s.texts, args, texts[:len(args)])), nil
}

// appendInts appends the integers of an array reply, or an integer reply,
// to dst.
//
//go:noinline
func appendInts(dst []int64, r *rd.RedisResult) ([]int64, error) {
	m, err := message(r)
	if err != nil {
		return nil, err
	}
	if m.IsInt64() || m.IsBool() {
		n, err := intOf(&m)
		if err != nil {
			return nil, fmt.Errorf("rueidis: %w", err)
		}
		return append(dst, n), nil
	}
	es, err := m.ToArray()
	if err != nil {
		return nil, fmt.Errorf("rueidis: reply is not an array: %w", err)
	}
	for i := range es {
		n, err := intOf(&es[i])
		if err != nil {
			return nil, fmt.Errorf("rueidis: reply element %d is not an integer: %w", i, err)
		}
		dst = append(dst, n)
	}
	return dst, nil
}

// intOf reads an integer, or a RESP3 boolean (a script's Lua boolean after
// redis.setresp(3)) as 1 or 0, as the generic path reads it.
func intOf(m *rd.RedisMessage) (int64, error) {
	if m.IsBool() {
		b, err := m.AsBool()
		if b {
			return 1, err
		}
		return 0, err
	}
	return m.AsInt64()
}

// scriptCmd builds EVALSHA or EVAL with its arguments as text.
//
//go:noinline
func (s *Store) scriptCmd(name, script string, keys []string, args []string) rd.Completed {
	c := s.c.B().Arbitrary(name, script, strconv.Itoa(len(keys)))
	for i, k := range keys {
		// Only the first key routes the call: the contract puts all keys
		// of a call in one slot, and a Cluster client's builder panics on
		// keys of different slots, where the server's CROSSSLOT error
		// reply is the better answer.
		if i == 0 {
			c = c.Keys(k)
		} else {
			c = c.Args(k)
		}
	}
	return c.Args(args...).Build()
}

// message returns the reply message of a script call, or its error mapped.
func message(r *rd.RedisResult) (rd.RedisMessage, error) {
	if err := r.NonRedisError(); err != nil {
		return rd.RedisMessage{}, roundTripErr(err)
	}
	m, err := r.ToMessage()
	if err != nil {
		return rd.RedisMessage{}, replyErr(err)
	}
	return m, nil
}

// Do implements store.Store: the commands go in one pipeline (one DoMulti;
// rueidis also pipelines concurrent callers on shared connections).
func (s *Store) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("rueidis: %w", err) // nothing sent
	}
	for _, c := range cmds {
		if err := checkCmd(c); err != nil {
			return nil, err
		}
	}
	if err := store.CheckConnCommands(cmds); err != nil {
		return nil, fmt.Errorf("rueidis: %w", err) // nothing sent
	}
	switch len(cmds) {
	case 0:
		return []store.Reply{}, nil
	case 1:
		cmd, _ := build(s.c.B(), cmds[0])
		r := s.c.Do(ctx, cmd)
		if err := r.NonRedisError(); err != nil {
			return nil, roundTripErr(err)
		}
		out := make([]store.Reply, 1)
		out[0] = reply(r)
		return out, nil
	}
	built := make([]rd.Completed, len(cmds))
	for i, c := range cmds {
		built[i], _ = build(s.c.B(), c)
	}
	if err := mixesSlots(s.c, built); err != nil {
		return nil, err // nothing sent
	}
	return collect(s.c.DoMulti(ctx, built...))
}

// errMixedSlots refuses a call that breaks the store contract in the one
// way a Cluster client of rueidis panics on instead of sending it (for the
// server's CROSSSLOT reply): keyless commands beside keys of two slots.
var errMixedSlots = errors.New("rueidis: the keys of one call must share a Cluster slot (keyless commands beside keys of several slots)")

// initSlot is the slot rueidis gives a keyless command (its internal
// cmds.InitSlot; TestClusterDoMixedSlots keeps it true to the version).
const initSlot = uint16(1 << 14)

// mixesSlots returns errMixedSlots for built commands a Cluster client
// would panic on.
func mixesSlots(c rd.Client, built []rd.Completed) error {
	if c.Mode() != rd.ClientModeCluster {
		return nil
	}
	keyless, seen, several := false, false, false
	var last uint16
	for i := range built {
		switch sl := built[i].Slot(); {
		case sl == initSlot:
			keyless = true
		case !seen:
			seen, last = true, sl
		case sl != last:
			several = true
		}
	}
	if keyless && several {
		return errMixedSlots
	}
	return nil
}

// collect maps the results of one pipeline: one round-trip error fails the
// whole call, since any of its commands may have run without its reply.
func collect(rs []rd.RedisResult) ([]store.Reply, error) {
	for _, r := range rs {
		if err := r.NonRedisError(); err != nil {
			return nil, roundTripErr(err)
		}
	}
	out := make([]store.Reply, len(rs))
	for i, r := range rs {
		out[i] = reply(r)
	}
	return out, nil
}

// reply maps the result of one command that got its reply.
func reply(r rd.RedisResult) store.Reply {
	m, err := r.ToMessage()
	if err != nil {
		return store.Reply{Err: replyErr(err)}
	}
	v, err := topValue(&m)
	return store.Reply{Val: v, Err: err}
}

// replyErr maps the server's reply to one command when it is an error or
// nil: nil is store.ErrNil, NOSCRIPT is store.ErrNoScript, a Cluster's
// TRYAGAIN is store.ErrTryAgain, the rest wrap the *rueidis.RedisError.
// (rueidis sends a command again after TRYAGAIN only when it is read-only:
// a script call's TRYAGAIN is the reply to its only send.)
func replyErr(err error) error {
	if rd.IsRedisNil(err) {
		return store.ErrNil
	}
	if re, ok := rd.IsRedisErr(err); ok {
		switch {
		case re.IsNoScript():
			return fmt.Errorf("rueidis: %w: %w", store.ErrNoScript, err)
		case re.IsTryAgain():
			return fmt.Errorf("rueidis: %w: %w", store.ErrTryAgain, err)
		}
	}
	return fmt.Errorf("rueidis: %w", err)
}

// roundTripErr maps an error that is not the server's reply (network,
// timeout, context, a closed client). The command may have been written
// and run, so the error wraps store.ErrUnknownOutcome, unless it is one that
// rueidis only returns before writing: a failed dial, a recycled dedicated
// connection, or the server's refusal of the connection's set-up (HELLO,
// AUTH: a wrong password, a user without the right), which rueidis hands
// every command of the connection as its error.
func roundTripErr(err error) error {
	if notSent(err) {
		return fmt.Errorf("rueidis: %w", err)
	}
	return fmt.Errorf("rueidis: %w: %w", store.ErrUnknownOutcome, err)
}

func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	if _, ok := rd.IsRedisErr(err); ok {
		return true // a reply given as a round trip's error: the set-up's
	}
	// (Not rd.ErrClosing: a closed client refuses new commands with it, but
	// a connection closed under calls already written, by Close's timer on
	// a silent server or a Sentinel's switch, answers them with it too.)
	// ErrNoSlot: a Cluster client found no node for a command's slot (one
	// that a Cluster left unserved, with cluster-require-full-coverage no)
	// when it picked the connections, before writing anything.
	return errors.Is(err, rd.ErrDedicatedClientRecycled) || errors.Is(err, rd.ErrNoAddr) || errors.Is(err, rd.ErrNoSlot)
}

// Batch implements store.Batcher with one DoMulti: rueidis pipelines the
// commands, and a Cluster client groups them by node and sends the groups
// in parallel. On a Cluster, commands without keys go in a DoMulti of
// their own, beside the others (rueidis refuses, with a panic, a DoMulti
// that mixes them with keys of several slots). Each command keeps its own
// outcome.
func (s *Store) Batch(ctx context.Context, cmds []store.Cmd) []store.Reply {
	out := make([]store.Reply, len(cmds))
	if err := ctx.Err(); err != nil {
		for i := range out {
			out[i].Err = fmt.Errorf("rueidis: %w", err) // nothing sent
		}
		return out
	}
	cluster := s.c.Mode() == rd.ClientModeCluster
	var keyed, keyless batchPart
	for i, c := range cmds {
		if err := checkCmd(c); err != nil {
			out[i].Err = err
			continue
		}
		if store.ConnCommand(c) {
			out[i].Err = fmt.Errorf("rueidis: %w", store.CheckConnCommands(cmds[i:i+1]))
			continue
		}
		b, hasKey := build(s.c.B(), c)
		part := &keyed
		if cluster && !hasKey {
			part = &keyless
		}
		part.built = append(part.built, b)
		part.at = append(part.at, i)
	}
	if len(keyed.at) > 0 && len(keyless.at) > 0 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.doMulti(ctx, keyless, out)
		}()
		s.doMulti(ctx, keyed, out)
		<-done
		return out
	}
	s.doMulti(ctx, keyed, out)
	s.doMulti(ctx, keyless, out)
	return out
}

// batchPart is some of a Batch's commands, built, and their indexes.
type batchPart struct {
	built []rd.Completed
	at    []int
}

// doMulti sends p's commands in one DoMulti and writes their replies to
// out at their indexes.
//
// A Cluster client fails every command of a DoMulti, unsent, when one of
// its slots has no node (rueidis.ErrNoSlot): then the commands go again
// one DoMulti per slot, side by side, so that only those of the unserved
// slots fail.
func (s *Store) doMulti(ctx context.Context, p batchPart, out []store.Reply) {
	if len(p.built) == 0 {
		return
	}
	rs := s.c.DoMulti(ctx, p.built...)
	if len(p.built) > 1 && allNoSlot(rs) {
		s.bySlot(ctx, p, out)
		return
	}
	for j, r := range rs {
		if err := r.NonRedisError(); err != nil {
			out[p.at[j]].Err = roundTripErr(err)
			continue
		}
		out[p.at[j]] = reply(r)
	}
}

// allNoSlot reports whether every result is rueidis.ErrNoSlot.
func allNoSlot(rs []rd.RedisResult) bool {
	for _, r := range rs {
		if !errors.Is(r.NonRedisError(), rd.ErrNoSlot) {
			return false
		}
	}
	return len(rs) > 0
}

// bySlot sends p's commands in one DoMulti per slot, in parallel, and
// writes their replies to out at their indexes.
func (s *Store) bySlot(ctx context.Context, p batchPart, out []store.Reply) {
	var order []uint16
	parts := map[uint16]*batchPart{}
	for j, b := range p.built {
		sl := b.Slot()
		q := parts[sl]
		if q == nil {
			q = &batchPart{}
			parts[sl] = q
			order = append(order, sl)
		}
		q.built = append(q.built, b)
		q.at = append(q.at, p.at[j])
	}
	if len(order) == 1 {
		for _, i := range p.at {
			out[i].Err = roundTripErr(rd.ErrNoSlot)
		}
		return
	}
	var wg sync.WaitGroup
	for _, sl := range order {
		wg.Add(1)
		go func(q *batchPart) {
			defer wg.Done()
			s.doMulti(ctx, *q, out)
		}(parts[sl])
	}
	wg.Wait()
}
