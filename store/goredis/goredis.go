package goredis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/big"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/argcache"
	"github.com/quotagate/limiter/internal/ctxend"
	"github.com/quotagate/limiter/internal/share"
	"github.com/quotagate/limiter/store"
)

// Store adapts a redis.UniversalClient. It is safe for concurrent use.
type Store struct {
	c redis.UniversalClient
	// ap sends single script calls when they are auto-pipelined
	// (WithAutoPipeline, or c is itself an AutoPipeliner); nil otherwise.
	ap *redis.AutoPipeliner
	// apErr is the client's refusal to make its AutoPipeliner, returned by
	// every script call.
	apErr error
	// enforce: the client ignores context deadlines (ContextTimeoutEnabled
	// is off), so the adapter enforces them itself.
	enforce bool
	// boxes holds recent integer arguments as interface values.
	boxes argcache.Boxes
	// dials remembers the client's last failure to connect.
	dials *dialErrors
	// shareN is WithSharedPipelines' n; sh shares pipelines among
	// concurrent script calls on a *redis.Client, nil when they are not
	// shared.
	shareN int
	sh     *gate
	// nodes shares pipelines per master on a *redis.ClusterClient.
	nodes *nodeSharing
	// proxy: WithShardingProxy was given.
	proxy bool
}

var (
	_ store.Store        = (*Store)(nil)
	_ store.Watcher      = (*Store)(nil)
	_ store.Int64sEvaler = (*Store)(nil)
	_ store.OneServer    = (*Store)(nil)
)

// Option configures a Store.
type Option func(*Store)

// WithShardingProxy says that the *redis.Client talks to a proxy that
// spreads keys over several servers by their hash slot or tag (Envoy's
// Redis proxy, twemproxy, a managed "cluster proxy") and routes a script
// call by its first key. Without it a Store on a *redis.Client reports
// that one server holds every key (store.OneServer), and
// limiter.AllowMany decides asks of different subjects in one script
// call, which such a proxy would send to one server only. A Store on a
// *redis.ClusterClient, *redis.Ring or *redis.AutoPipeliner never does.
func WithShardingProxy() Option {
	return func(s *Store) { s.proxy = true }
}

// OneServer implements store.OneServer: true for a *redis.Client (a
// single server, or Sentinel's current master) unless WithShardingProxy
// was given.
func (s *Store) OneServer() bool {
	_, client := s.c.(*redis.Client)
	return client && !s.proxy
}

// WithAutoPipeline sends single decisions (one script call each) through
// the client's AutoPipeliner, the one instance its AutoPipeline method
// keeps (to tune it, call the client's AutoPipelineWithOptions before New):
// the calls of many goroutines then share round trips, which raises the
// decisions per second a process makes (go-redis marks the API
// experimental). Batches, transactions and WATCH still go through the
// client. It applies to a *redis.Client, *redis.ClusterClient or
// *redis.Ring; for another client it changes nothing. Should the client
// refuse to make its AutoPipeliner, every script call of the Store returns
// that error.
//
// A decision is still sent at most once: a batch the AutoPipeliner replays
// after a lost connection cannot write it again. go-redis does not end a
// queued call at its context's deadline, so the adapter does (see the
// package documentation), whatever ContextTimeoutEnabled says.
func WithAutoPipeline() Option {
	return func(s *Store) {
		var ap *redis.AutoPipeliner
		var err error
		switch x := s.c.(type) {
		case *redis.Client:
			ap, err = x.AutoPipeline()
		case *redis.ClusterClient:
			ap, err = x.AutoPipeline()
		case *redis.Ring:
			ap, err = x.AutoPipeline()
		default:
			return
		}
		if err != nil {
			s.apErr = fmt.Errorf("goredis: auto-pipeline: %w", err)
			return
		}
		s.ap = ap
	}
}

// New returns a Store on c, or nil when c is nil, also a nil
// *redis.Client, *redis.ClusterClient, *redis.Ring or *redis.AutoPipeliner
// (limiter.New then reports limiter.ErrNilStore).
func New(c redis.UniversalClient, opts ...Option) *Store {
	switch x := c.(type) {
	case nil:
		return nil
	case *redis.Client:
		if x == nil {
			return nil
		}
	case *redis.ClusterClient:
		if x == nil {
			return nil
		}
	case *redis.Ring:
		if x == nil {
			return nil
		}
	case *redis.AutoPipeliner:
		if x == nil {
			return nil
		}
	}
	s := &Store{c: c, enforce: !contextTimeouts(c), dials: dialErrorsOf(c)}
	if ap, ok := c.(*redis.AutoPipeliner); ok {
		s.ap = ap
	}
	s.shareN = DefaultSharedPipelines
	for _, o := range opts {
		if o != nil { // an option chosen conditionally and left unset
			o(s)
		}
	}
	if s.ap == nil && s.apErr == nil && s.shareN > 0 {
		switch x := c.(type) {
		case *redis.Client:
			s.sh = share.NewGate(s.shareN, s.sendShared)
		case *redis.ClusterClient:
			s.nodes = &nodeSharing{cc: x, gates: share.NewNodes(s.shareN, s.sendShared)}
		}
	}
	return s
}

// contextTimeouts reports whether c honours context deadlines on its own:
// ContextTimeoutEnabled, and socket deadlines not disabled (a ReadTimeout
// or WriteTimeout of -2, which go-redis keeps as -1, sets none, so a
// context's deadline never reaches the socket).
func contextTimeouts(c redis.UniversalClient) bool {
	honours := func(enabled bool, read, write time.Duration) bool {
		return enabled && read >= 0 && write >= 0
	}
	switch x := c.(type) {
	case *redis.Client:
		o := x.Options()
		return honours(o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout)
	case *redis.ClusterClient:
		o := x.Options()
		return honours(o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout)
	case *redis.Ring:
		o := x.Options()
		return honours(o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout)
	}
	return false
}

// bounds reports whether a call under ctx must be bounded by the adapter:
// when the client ignores context deadlines, and when ctx can be cancelled
// but has no deadline (with ContextTimeoutEnabled go-redis turns a
// deadline into socket timeouts, but does not see a cancellation: the call
// would wait for ReadTimeout). A context cancelled before its deadline
// ends a call at that deadline.
func (s *Store) bounds(ctx context.Context) bool {
	if ctx.Done() == nil {
		return false
	}
	if s.enforce {
		return true
	}
	_, ok := ctx.Deadline()
	return !ok
}

// errAbandoned marks a call the adapter stopped waiting for when its
// context ended (its deadline passed, or it was canceled).
var errAbandoned = errors.New("gave up when the context ended")

// bounded runs f, which sends and receives one round trip, and returns when
// it does or when ctx is done, whichever comes first. Without
// ContextTimeoutEnabled go-redis waits for its own ReadTimeout (3 s by
// default) whatever the context says; the caller's deadline wins here.
// unsent, called when the call is given up on, reports whether nothing
// that changes data was written and never will be (the call's guards are
// sealed); otherwise the call may still reach the server, and its error
// wraps store.ErrUnknownOutcome. The error keeps the last failure to
// connect (refused, a certificate), if one was seen.
func (s *Store) bounded(ctx context.Context, unsent func() bool, f func()) error {
	if !s.bounds(ctx) {
		f()
		return nil
	}
	return s.boundedAlways(ctx, unsent, f)
}

// boundedAlways is bounded for a call that the adapter bounds whatever the
// client's options.
//
// A panic in f (fn's, in a Watch) reaches the caller's goroutine when the
// caller still waits for f, where it can be recovered, and ends the process
// from f's goroutine otherwise, as any goroutine's would.
func (s *Store) boundedAlways(ctx context.Context, unsent func() bool, f func()) error {
	done := make(chan struct{})
	var mu sync.Mutex
	waiting := true
	var panicked *any
	go func() {
		defer func() {
			r := recover()
			mu.Lock()
			handed := r != nil && waiting
			if handed {
				panicked = &r
			}
			mu.Unlock()
			close(done)
			if r != nil && !handed {
				panic(r)
			}
		}()
		f()
	}()
	select {
	case <-done:
		if panicked != nil {
			panic(*panicked)
		}
		return nil
	case <-ctx.Done():
		mu.Lock()
		waiting = false
		p := panicked
		mu.Unlock()
		if p != nil {
			panic(*p)
		}
		err := s.dials.explain(ctx.Err())
		if unsent() {
			return fmt.Errorf("%w: %w", errAbandoned, err)
		}
		return fmt.Errorf("%w: %w: %w", store.ErrUnknownOutcome, errAbandoned, err)
	}
}

// Client returns the wrapped client.
func (s *Store) Client() redis.UniversalClient { return s.c }

// errResend is returned by a guard asked to write its command a second time.
var errResend = errors.New("goredis: command already written once; not re-sending")

// errTryAgain is returned by a guard asked to write its command again after
// the command's reply was TRYAGAIN: the command did not run, and the
// adapter returns store.ErrTryAgain, on which store.Script sends it again
// after a pause (go-redis would send it again at once, and a guard could
// not tell a second TRYAGAIN from the first).
var errTryAgain = errors.New("goredis: refused with TRYAGAIN; not re-sending")

// guard is an argument that can be written to the wire once. A second write
// (a client retry after a lost reply) fails, so the command cannot run twice;
// only a reply that refused the command without running it (a Cluster's
// redirection) lets one more write through.
// A guard abandoned at its call's deadline before it was written is sealed:
// it refuses to be written at all, so the call's outcome is known (nothing
// ran) although its goroutine goes on.
type guard struct {
	state atomic.Int32 // guardFresh, guardWritten or guardSealed
	// sized: the command goes through an AutoPipeliner, which may marshal
	// its arguments to estimate their size before it writes them (see
	// sizing).
	sized bool
	// shared: the guard is a script call's numkeys and the call goes out
	// in an AutoPipeliner's batch, with other callers' commands. Sealed,
	// it is written as -1 (the server refuses the command before running
	// it) rather than failing the write, which would fail the whole batch.
	shared bool
	// clusterTx: the command is queued in a ClusterClient's transaction,
	// which go-redis writes again only when the node refused the whole
	// transaction, nothing run (MOVED, ASK or TRYAGAIN for a command it
	// would not queue, then EXECABORT; CLUSTERDOWN; a write that failed
	// before EXEC was whole), and never after a reply was lost: it treats
	// a failed read as fatal, as a transaction may have run. The refusals
	// of the queued commands are not given to the commands, so a guard
	// cannot see them: a write after the first is let through.
	clusterTx bool
	val       any
	buf       [20]byte
	// cmd is the command the guard is an argument of, when known: a
	// write after the first is let through when the command's reply is a
	// refusal that ran nothing (see ranNothing) read after the last write.
	cmd *redis.Cmd
	// refused is the text of the refusal that let the last write after
	// the first through ("" before any). go-redis leaves a command's error as it is
	// when a write fails, or when a read fails before the command's reply
	// (it sets only commands without an error), and a Client retries a
	// lost reply without setting it: a refusal equal to this one may
	// predate that write, which may have run, so it lets nothing through.
	// Only a reply read sets a refusal, so one that differs is the reply
	// to the last write. (Two equal refusals in a row, as when go-redis
	// retries TRYAGAIN, end the call as an unknown outcome: safe.)
	refused string
}

const (
	guardFresh int32 = iota
	guardWritten
	guardSealed
)

// sealedNumKeys is what a sealed script call in a shared batch sends as its
// numkeys: "ERR Number of keys can't be negative", nothing run.
var sealedNumKeys = []byte("-1")

// errSealed is returned by a guard asked to write its command after the
// caller gave up on it.
var errSealed = errors.New("goredis: the caller gave up on this command before it was written; not sending")

// MarshalBinary implements encoding.BinaryMarshaler, which go-redis calls
// each time it writes the argument.
func (g *guard) MarshalBinary() ([]byte, error) {
	if g.sized && sizing() {
		return g.bytes(), nil
	}
	if !g.state.CompareAndSwap(guardFresh, guardWritten) {
		if g.state.Load() == guardSealed {
			if g.shared {
				return sealedNumKeys, nil
			}
			return nil, errSealed
		}
		if g.clusterTx {
			return g.bytes(), nil
		}
		if g.cmd != nil {
			if err := g.cmd.Err(); ranNothing(err) && err.Error() != g.refused {
				// go-redis follows a redirection (MOVED, ASK) or retries
				// a refusal: the last write ran nothing
				if isTryAgain(err) {
					// Never lets a write through, so a TRYAGAIN here is
					// always the reply to the last write.
					return nil, errTryAgain
				}
				g.refused = err.Error()
				return g.bytes(), nil
			}
		}
		return nil, errResend
	}
	return g.bytes(), nil
}

// ranNothing reports a reply with which a server refuses a command without
// running it: a Cluster's redirections (MOVED, ASK: another node holds the
// slot), TRYAGAIN (the keys of one call are split by a slot's migration),
// CLUSTERDOWN, LOADING, READONLY (a replica), MASTERDOWN. go-redis sends
// such a command again (a ClusterClient up to MaxRedirects times).
func ranNothing(err error) bool {
	var re redis.Error
	if err == nil || !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	for _, p := range [...]string{"MOVED ", "ASK ", "TRYAGAIN ", "CLUSTERDOWN ", "LOADING ", "READONLY ", "MASTERDOWN "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// isTryAgain reports a TRYAGAIN reply (see ranNothing).
func isTryAgain(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "TRYAGAIN ")
}

// bytes returns the argument's encoding.
func (g *guard) bytes() []byte {
	switch v := g.val.(type) {
	case int:
		return strconv.AppendInt(g.buf[:0], int64(v), 10)
	case int64:
		return strconv.AppendInt(g.buf[:0], v, 10)
	case string:
		return []byte(v)
	case []byte:
		return v
	case float64:
		return strconv.AppendFloat(g.buf[:0], v, 'f', -1, 64)
	}
	return fmt.Appendf(nil, "%v", g.val)
}

// sizerPC and writerPC remember the program counters that sizing found
// to be a size estimate and a write, so that the common calls skip
// resolving the frame.
var sizerPC, writerPC atomic.Uintptr

// sizing reports whether the running guard's MarshalBinary was called by
// go-redis's AutoPipeliner to estimate the command's size before it queues
// it (v9.23 and later do, through cmdApproxBytes), not to write it. Any
// other caller counts as a write. Every call is looked at (a short stack
// walk): v9.23 estimates a command's size more than once before it writes
// it. Should a later go-redis size commands from a function of another
// name, its calls fail with errResend (an error, never a command written
// twice) until this learns the name.
func sizing() bool {
	var pc [1]uintptr
	// 0: runtime.Callers, 1: sizing, 2: MarshalBinary, 3: its caller
	if runtime.Callers(3, pc[:]) == 0 {
		return false
	}
	switch pc[0] {
	case sizerPC.Load():
		return true
	case writerPC.Load():
		return false
	}
	f, _ := runtime.CallersFrames([]uintptr{pc[0]}).Next() // (pc stays on the stack)
	if strings.HasPrefix(f.Function, "github.com/redis/go-redis/v9.") && strings.Contains(f.Function, "ApproxBytes") {
		sizerPC.Store(pc[0])
		return true
	}
	writerPC.Store(pc[0])
	return false
}

// String returns the argument as text; go-redis's Cluster routing reads key
// positions through it.
func (g *guard) String() string {
	switch v := g.val.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return fmt.Sprint(g.val)
}

// written reports whether g's command may have been written: always for
// a command without arguments, which has no guard (nil).
func (g *guard) written() bool { return g == nil || g.state.Load() == guardWritten }

// seal makes g refuse to be written from now on and reports whether it was
// not written before; a nil guard (a command without arguments) cannot be
// sealed.
func (g *guard) seal() bool {
	return g != nil && (g.state.CompareAndSwap(guardFresh, guardSealed) || g.state.Load() == guardSealed)
}

// sealAll seals the guards of cmds (guards[i] is cmds[i]'s) and reports
// whether none had been written: then none of their commands ever will be.
// A command without arguments has no guard and cannot be sealed: it counts
// as unwritten only when it is PING or TIME, which change nothing (so a
// clock read given up on is a known outcome); any other may still be
// written.
func sealAll(guards []*guard, cmds []store.Cmd) bool {
	unsent := true
	for i, g := range guards {
		if g == nil && (strings.EqualFold(cmds[i].Name, "PING") || strings.EqualFold(cmds[i].Name, "TIME")) {
			continue
		}
		unsent = g.seal() && unsent
	}
	return unsent
}

// EvalSha implements store.Store.
func (s *Store) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	return s.eval(ctx, "evalsha", sha, keys, args)
}

// Eval implements store.Store.
func (s *Store) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	return s.eval(ctx, "eval", src, keys, args)
}

// evalCall holds a script call's guard and, for small calls, its argument
// array, so that both cost one allocation.
type evalCall struct {
	g guard
	// s and cmd are the Store and command of a call that shares round
	// trips (share.Call's methods).
	s   *Store
	cmd *redis.Cmd
	a   [8]any // a single-limit decision's: name, script, numkeys, key, 4 arguments
}

func (s *Store) eval(ctx context.Context, name, script string, keys []string, args []any) (any, error) {
	call, a := s.newEvalCall(name, script, keys, len(args))
	a = append(a, args...)
	v, err := s.run(ctx, call, keys, a)
	if err != nil {
		return nil, err
	}
	return normalise(v), nil
}

// EvalShaInt64s implements store.Int64sEvaler: the integers go straight
// into the command's argument array.
func (s *Store) EvalShaInt64s(ctx context.Context, sha string, keys []string, args []int64, dst []int64) ([]int64, error) {
	return s.evalInt64s(ctx, "evalsha", sha, keys, args, dst)
}

// EvalInt64s implements store.Int64sEvaler.
func (s *Store) EvalInt64s(ctx context.Context, src string, keys []string, args []int64, dst []int64) ([]int64, error) {
	return s.evalInt64s(ctx, "eval", src, keys, args, dst)
}

func (s *Store) evalInt64s(ctx context.Context, name, script string, keys []string, args []int64, dst []int64) ([]int64, error) {
	call, a := s.newEvalCall(name, script, keys, len(args))
	for _, n := range args {
		a = append(a, s.boxes.Box(n))
	}
	v, err := s.run(ctx, call, keys, a)
	if err != nil {
		return nil, err
	}
	nums, err := store.AppendInt64s(dst, normalise(v))
	if err != nil {
		return nil, fmt.Errorf("goredis: %w", err)
	}
	return nums, nil
}

// newEvalCall returns a script call's guard and its arguments up to the
// keys, with room for nargs more.
func (s *Store) newEvalCall(name, script string, keys []string, nargs int) (*evalCall, []any) {
	call := &evalCall{g: guard{val: len(keys), sized: s.ap != nil, shared: s.ap != nil}}
	a := call.a[:0]
	if n := 3 + len(keys) + nargs; n > len(call.a) {
		a = make([]any, 0, n)
	}
	a = append(a, name, script, &call.g)
	for _, k := range keys {
		a = append(a, k)
	}
	return call, a
}

// run sends a script call and returns its reply value.
func (s *Store) run(ctx context.Context, call *evalCall, keys []string, a []any) (any, error) {
	if s.apErr != nil {
		return nil, s.apErr
	}
	cmd := redis.NewCmd(ctx, a...)
	call.g.cmd = cmd
	if s.ap != nil {
		// The AutoPipeliner does not end a queued call at its context's
		// end. A deferred one (AsyncAutoPipeline) returns from Process
		// once the call is queued; its Err waits for the reply.
		if ctx.Done() == nil {
			_ = s.ap.Process(ctx, cmd)
		} else if err := s.boundedAlways(ctx, call.g.seal, func() { _ = s.ap.Process(ctx, cmd); _ = cmd.Err() }); err != nil {
			return nil, fmt.Errorf("goredis: %w", err)
		}
	} else if sh := s.sharingFor(ctx, keys); sh != nil {
		if err := s.runShared(ctx, sh, call, cmd); err != nil {
			return nil, err
		}
	} else if err := s.send(ctx, call, cmd); err != nil {
		return nil, err
	}
	v, err := cmd.Result()
	if err != nil && !readThenResent(v, err) {
		return nil, s.mapErr(ctx, err, call.g.written())
	}
	return v, nil
}

// readThenResent reports a command whose reply was read, after which
// go-redis tried to send it again with the rest of its pipeline, and its
// guard refused: its value is its reply, and it ran once. A ClusterClient
// sends a node's whole pipeline again when the first command's reply is a
// refusal it retries (CLUSTERDOWN for a slot without a node, which it
// sends to any node; TRYAGAIN) or when a later read fails; go-redis then
// gives the refused write's error to every command that has no error yet.
// A failed read leaves no value.
func readThenResent(v any, err error) bool {
	return v != nil && (errors.Is(err, errResend) || errors.Is(err, errTryAgain))
}

// send sends a script call on its own and returns once cmd has its reply,
// or with an error when ctx ended first (see bounded).
func (s *Store) send(ctx context.Context, call *evalCall, cmd *redis.Cmd) error {
	if !s.bounds(ctx) {
		_ = s.c.Process(ctx, cmd) // the hot path: no closure to allocate
		return nil
	}
	if err := s.bounded(ctx, call.g.seal, func() { _ = s.c.Process(ctx, cmd) }); err != nil {
		return fmt.Errorf("goredis: %w", err)
	}
	return nil
}

// Do implements store.Store: the commands go in one pipeline. A call that
// is one transaction, MULTI, commands, EXEC, goes through go-redis's
// TxPipeline, which keeps it on one connection to its keys' node (a
// ClusterClient sends a plain pipeline's keyless MULTI and EXEC to any
// master); its replies are the server's: OK, QUEUED per command, then
// EXEC's array, in which a command's error reply is an error value.
func (s *Store) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if err := store.CheckConnCommands(cmds); err != nil {
		return nil, fmt.Errorf("goredis: %w", err) // nothing sent
	}
	if store.IsTx(cmds) {
		return s.doTx(ctx, cmds)
	}
	return s.doPipe(ctx, s.c.Pipeline(), cmds)
}

// txPipeline returns the pipeline that runs inner as one transaction. A
// Ring's own TxPipeline groups the commands by the shard of their first
// argument and wraps each group in a MULTI/EXEC of its own: a keyless
// command (TIME) would run on another shard than the keys, in another
// transaction, on another clock. On a Ring the transaction goes whole to
// the shard of its first key (go-redis's Ring.Watch does the same; as
// there, hooks added to the Ring itself do not see it, its shards' do).
func (s *Store) txPipeline(inner []store.Cmd) redis.Pipeliner {
	if r, ok := s.c.(*redis.Ring); ok {
		for _, c := range inner {
			if len(c.Args) == 0 {
				continue // TIME: no key
			}
			if key, ok := c.Args[0].(string); ok {
				if shard, err := r.GetShardClientForKey(key); err == nil {
					return shard.TxPipeline()
				}
				break // no shard up: the Ring's pipeline says so
			}
		}
	}
	return s.c.TxPipeline()
}

// doTx runs a MULTI ... EXEC call through TxPipeline.
func (s *Store) doTx(ctx context.Context, cmds []store.Cmd) ([]store.Reply, error) {
	inner := cmds[1 : len(cmds)-1]
	p := s.txPipeline(inner)
	gcmds, guards := queue(ctx, p, inner, s.ap != nil)
	if _, ok := s.c.(*redis.ClusterClient); ok {
		for _, g := range guards {
			if g != nil {
				g.clusterTx = true
			}
		}
	}
	var execErr error
	if err := s.bounded(ctx, func() bool { return sealAll(guards, inner) }, func() { _, execErr = p.Exec(ctx) }); err != nil {
		return nil, fmt.Errorf("goredis: %w", err)
	}
	if multiRefused(execErr) {
		return nil, fmt.Errorf("goredis: MULTI: %w: %w", store.ErrUnknownOutcome, execErr)
	}
	rs, err := s.collect(ctx, gcmds, guards, execErr)
	if err != nil {
		return nil, err
	}
	out := make([]store.Reply, len(cmds))
	out[0].Val = "OK"
	// (a refusal go-redis gave up following: a TRYAGAIN that outlasted
	// its redirections, a CLUSTERDOWN, is the whole transaction's)
	refused := errors.Is(execErr, redis.TxFailedErr) || execAborted(execErr) || ranNothing(execErr)
	if refused {
		// Nothing ran: a command refused while queued keeps its error.
		for i, r := range rs {
			out[1+i].Val = "QUEUED"
			if r.Err != nil && gcmds[i].Err() != execErr {
				out[1+i] = store.Reply{Err: r.Err}
			}
		}
		out[len(out)-1].Err = s.mapErr(ctx, execErr, false)
		return out, nil
	}
	vals := make([]any, len(rs))
	for i, r := range rs {
		out[1+i].Val = "QUEUED"
		switch {
		case errors.Is(r.Err, store.ErrNil):
		case r.Err != nil:
			vals[i] = r.Err
		default:
			vals[i] = r.Val
		}
	}
	out[len(out)-1].Val = vals
	return out, nil
}

// doPipe runs cmds on p and collects their replies.
func (s *Store) doPipe(ctx context.Context, p redis.Pipeliner, cmds []store.Cmd) ([]store.Reply, error) {
	gcmds, guards := queue(ctx, p, cmds, s.ap != nil)
	var execErr error
	if err := s.bounded(ctx, func() bool { return sealAll(guards, cmds) }, func() { _, execErr = p.Exec(ctx) }); err != nil {
		return nil, fmt.Errorf("goredis: %w", err)
	}
	return s.collect(ctx, gcmds, guards, execErr)
}

// queue queues cmds on p, each with its first argument guarded, and
// returns them with one guard per command (nil for a command without
// arguments, which cannot be guarded).
func queue(ctx context.Context, p redis.Pipeliner, cmds []store.Cmd, sized bool) ([]*redis.Cmd, []*guard) {
	gcmds := make([]*redis.Cmd, len(cmds))
	guards := make([]*guard, len(cmds))
	for i, c := range cmds {
		a := make([]any, 0, 1+len(c.Args))
		a = append(a, c.Name)
		for j, v := range c.Args {
			if j == 0 {
				guards[i] = &guard{val: v, sized: sized}
				v = guards[i]
			}
			a = append(a, v)
		}
		gcmds[i] = redis.NewCmd(ctx, a...)
		if guards[i] != nil {
			guards[i].cmd = gcmds[i]
		}
		_ = p.Process(ctx, gcmds[i])
	}
	return gcmds, guards
}

// collect reads the replies of gcmds after their pipeline ran and returned
// execErr. A command that has neither a value nor an error was never
// processed: the pipeline failed before it (a connection that could not be
// set up, such as a wrong password, fails the whole pipeline without
// touching its commands), and execErr is the call's error, not a nil reply.
func (s *Store) collect(ctx context.Context, gcmds []*redis.Cmd, guards []*guard, execErr error) ([]store.Reply, error) {
	written := false
	for _, g := range guards {
		// (a command without arguments, unguarded, changes nothing the
		// limiter sends: PING, TIME; as before, it alone leaves the
		// call's failure a known one)
		written = written || (g != nil && g.written())
	}
	out := make([]store.Reply, len(gcmds))
	for i, c := range gcmds {
		v, err := c.Result()
		if v == nil && err == nil {
			if execErr == nil {
				execErr = errors.New("no reply")
			}
			return nil, s.mapErr(ctx, execErr, written)
		}
		if err != nil && !isReply(err) {
			return nil, s.mapErr(ctx, err, written)
		}
		if err != nil {
			out[i].Err = s.mapErr(ctx, err, false)
			continue
		}
		out[i].Val = normalise(v)
	}
	return out, nil
}

// Watch implements store.Watcher with go-redis's Watch, which pins one
// connection and un-watches it on return. go-redis sends the WATCH and the
// UNWATCH itself, so the whole transaction is bounded by ctx as one unit
// (see bounded): a blackholed server costs the caller its deadline, not the
// client's read timeout. fn's commands then run on the transaction's own
// goroutine, one after another, so the pinned connection is never used by
// two goroutines; once ctx is done they send nothing.
func (s *Store) Watch(ctx context.Context, keys []string, fn func(store.Tx) error) error {
	var err error
	called := false
	cc, cluster := s.c.(*redis.ClusterClient)
	var on string // the node the WATCH ran on, as go-redis names it
	ws := &watchState{}
	if berr := s.bounded(ctx, ws.abandon, func() {
		err = s.c.Watch(ctx, func(tx *redis.Tx) error {
			called = true
			if cluster {
				on = tx.String()
			}
			defer ws.unwatch(ctx, tx)
			return fn(txn{s, tx, ws, false, watchedSlot(keys)})
		}, keys...)
	}); berr != nil {
		return fmt.Errorf("goredis: watch: %w", berr)
	}
	// go-redis returns fn's error as it is once fn was called. (Never
	// compared with ==: an error of an uncomparable type would panic.)
	if called {
		if cluster {
			learnMoves(ctx, cc, keys[0], on, err)
		}
		return err
	}
	// go-redis's ClusterClient.Watch returns nil, fn never called, when
	// its redirections run out on a MOVED or ASK (v9.22)
	if cc, ok := s.c.(*redis.ClusterClient); ok && (err == nil || isRedirect(err)) {
		// A slot in migration: go-redis sends the WATCH the source
		// refused with ASK to the target without ASKING, which refuses
		// it with MOVED, and so on until its redirections run out.
		return s.watchMigrating(ctx, cc, keys, fn)
	}
	if err == nil {
		return fmt.Errorf("goredis: watch: the client returned without calling the transaction")
	}
	// The WATCH failed. Like any command given up on after it may have
	// been written, its outcome is unknown (it changes no data); one that
	// never left (a failed dial, no connection to be had, a closed client)
	// is not.
	return s.mapErr(ctx, err, !notSent(err))
}

// learnMoves has cc read the slot map again (in the background) when a
// Watch of key met a moved slot: a read or a transaction refused with
// MOVED or ASK (err), or a WATCH that go-redis sent to the node a MOVED
// named, not to the slot's master in its map (on names the node the WATCH
// ran on). go-redis follows a MOVED in its Watch without updating its map,
// so until its next reload (ClusterStateReloadInterval, a minute by
// default) every Watch of the slot would be sent to the old node first.
func learnMoves(ctx context.Context, cc *redis.ClusterClient, key, on string, err error) {
	if !isRedirect(err) {
		m, merr := cc.MasterForKey(ctx, key)
		if merr != nil || m.String() == on {
			return
		}
	}
	cc.ReloadState(ctx)
}

// notSent reports a failure to get a connection at all: a dial refused, a
// TLS handshake that failed (a certificate), no connection to be had, a
// closed client. The command was never written.
func notSent(err error) bool {
	var op *net.OpError
	var cert *tls.CertificateVerificationError
	var alert tls.AlertError
	var hdr tls.RecordHeaderError
	return errors.As(err, &op) && op.Op == "dial" ||
		errors.As(err, &cert) || errors.As(err, &alert) || errors.As(err, &hdr) ||
		errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed)
}

// watchState lets a Watch given up on at its deadline know whether its
// transaction's EXEC was sent, and keeps it from being sent afterwards.
// watched records a WATCH that fn sent through Tx.Do, which go-redis does
// not know of and would leave armed on the connection it pools.
type watchState struct {
	mu        sync.Mutex
	abandoned bool
	execSent  bool
	watched   bool
}

// unwatch un-watches the pinned connection before go-redis pools it, when
// fn sent a WATCH of its own (go-redis un-watches only the keys it
// watched). It runs whatever ctx says, bounded by a second: a connection
// that cannot take it fails, and go-redis drops it.
func (w *watchState) unwatch(ctx context.Context, tx *redis.Tx) {
	w.mu.Lock()
	watched := w.watched
	w.mu.Unlock()
	if !watched {
		return
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = tx.Unwatch(uctx).Err()
}

// abandon gives the Watch up and reports whether no EXEC was sent (the
// reads and WATCH it may have sent change no data).
func (w *watchState) abandon() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.abandoned = true
	return !w.execSent
}

// sending marks the EXEC as sent, unless the Watch was given up on.
func (w *watchState) sending() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.abandoned {
		return false
	}
	w.execSent = true
	return true
}

type txn struct {
	s  *Store
	tx *redis.Tx
	ws *watchState
	// asking: tx is a migrating slot's target, which takes each command,
	// and each transaction, after ASKING.
	asking bool
	// slot is the watched keys' Cluster slot (-1 without keys).
	slot int
}

// watchedSlot returns the Cluster slot of keys, the first one's, or -1
// for none.
func watchedSlot(keys []string) int {
	if len(keys) == 0 {
		return -1
	}
	return int(store.KeySlot(keys[0]))
}

// isRedirect reports a Cluster's MOVED or ASK refusal: the command did not
// run.
func isRedirect(err error) bool {
	_, _, ok := redirection(err)
	return ok
}

// redirection returns the node a MOVED or ASK refusal names, and whether
// it is an ASK.
func redirection(err error) (addr string, ask, ok bool) {
	var re redis.Error
	if !errors.As(err, &re) {
		return "", false, false
	}
	f := strings.Fields(re.Error())
	if len(f) != 3 || f[0] != "MOVED" && f[0] != "ASK" {
		return "", false, false
	}
	return f[2], f[0] == "ASK", true
}

// maxWatchHops bounds the nodes watchMigrating sends a WATCH to.
const maxWatchHops = 4

// watchMigrating is Watch on a Cluster whose slot of keys is being
// migrated (or has just moved): it sends the WATCH to the node that owns
// the slot by go-redis's slot map and follows the refusals itself, a MOVED
// to the node it names, an ASK to the slot's target after ASKING, where
// every later command and transaction of fn is sent after ASKING too.
func (s *Store) watchMigrating(ctx context.Context, cc *redis.ClusterClient, keys []string, fn func(store.Tx) error) error {
	node, err := cc.MasterForKey(ctx, keys[0])
	if err != nil {
		return s.mapErr(ctx, err, false)
	}
	args := make([]any, 0, 1+len(keys))
	args = append(args, "watch")
	for _, k := range keys {
		args = append(args, k)
	}
	// (as many sends as go-redis's own Watch makes: MaxRedirects, -1 in
	// the options given, is 0 by now)
	hops := min(max(cc.Options().MaxRedirects+1, 1), maxWatchHops)
	asking := false
	for hop := 0; ; hop++ {
		var err error
		called := false
		ws := &watchState{}
		if berr := s.bounded(ctx, ws.abandon, func() {
			err = node.Watch(ctx, func(tx *redis.Tx) error {
				ws.mu.Lock()
				ws.watched = true // (go-redis does not know of this WATCH)
				ws.mu.Unlock()
				defer ws.unwatch(ctx, tx)
				watch := redis.NewStatusCmd(ctx, args...)
				if _, err := tx.Pipelined(ctx, func(p redis.Pipeliner) error {
					if asking {
						_ = p.Process(ctx, redis.NewStatusCmd(ctx, "asking"))
					}
					return p.Process(ctx, watch)
				}); err != nil {
					return err
				}
				called = true
				return fn(txn{s, tx, ws, asking, watchedSlot(keys)})
			})
		}); berr != nil {
			return fmt.Errorf("goredis: watch: %w", berr)
		}
		if err == nil || called {
			return err
		}
		addr, ask, ok := redirection(err)
		if !ok || hop+1 >= hops {
			return s.mapErr(ctx, err, !notSent(err))
		}
		asking = ask
		if node, err = masterAt(ctx, cc, addr); err != nil {
			// a node that serves no slot yet (it joined the Cluster and
			// this is the first slot moving to it): not among the
			// slot map's masters, so a client of its own, for this
			// Watch
			node = nodeClient(cc, addr)
			defer node.Close()
		}
	}
}

// nodeClient returns a new client of the Cluster node at addr, made with
// cc's options (go-redis's own node clients' options, with one connection).
func nodeClient(cc *redis.ClusterClient, addr string) *redis.Client {
	o := cc.Options()
	opt := &redis.Options{
		Addr:                         addr,
		ClientName:                   o.ClientName,
		Dialer:                       o.Dialer,
		OnConnect:                    o.OnConnect,
		Protocol:                     o.Protocol,
		Username:                     o.Username,
		Password:                     o.Password,
		CredentialsProvider:          o.CredentialsProvider,
		CredentialsProviderContext:   o.CredentialsProviderContext,
		StreamingCredentialsProvider: o.StreamingCredentialsProvider,
		MaxRetries:                   o.MaxRetries,
		MinRetryBackoff:              o.MinRetryBackoff,
		MaxRetryBackoff:              o.MaxRetryBackoff,
		DialTimeout:                  o.DialTimeout,
		ReadTimeout:                  o.ReadTimeout,
		WriteTimeout:                 o.WriteTimeout,
		ContextTimeoutEnabled:        o.ContextTimeoutEnabled,
		PoolSize:                     1,
		PoolTimeout:                  o.PoolTimeout,
		TLSConfig:                    o.TLSConfig,
		DisableIdentity:              o.DisableIdentity,
		IdentitySuffix:               o.IdentitySuffix,
		UnstableResp3:                o.UnstableResp3,
	}
	if o.NewClient != nil {
		return o.NewClient(opt)
	}
	return redis.NewClient(opt)
}

// masterAt returns the client of cc's master at addr.
func masterAt(ctx context.Context, cc *redis.ClusterClient, addr string) (*redis.Client, error) {
	var mu sync.Mutex
	var node *redis.Client
	err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		if c.Options().Addr == addr {
			mu.Lock()
			node = c
			mu.Unlock()
		}
		return nil
	})
	if err == nil && node == nil {
		err = fmt.Errorf("no master at %s in the Cluster's slot map", addr)
	}
	return node, err
}

// Do runs cmds on the pinned connection outside MULTI. Watch bounds it.
func (t txn) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("goredis: %w", err) // nothing sent
	}
	if err := store.CheckTxCommands(cmds, false); err != nil {
		// (go-redis hands the connection back to its pool as it is: a
		// lone MULTI or a SELECT would outlive the Watch)
		return nil, fmt.Errorf("goredis: %w", err) // nothing sent
	}
	for _, c := range cmds {
		if strings.EqualFold(c.Name, "WATCH") {
			t.ws.mu.Lock()
			t.ws.watched = true
			t.ws.mu.Unlock()
		}
	}
	if t.asking {
		return t.doAsking(ctx, cmds)
	}
	gcmds, rs, err := t.pipe(ctx, cmds)
	if err != nil {
		return nil, err
	}
	if err := t.slotMoved(cmds, gcmds); err != nil {
		return nil, err
	}
	return rs, nil
}

// slotMoved returns store.ErrTxAborted when a command (cmds[i], sent as
// gcmds[i]) on a key of the watched slot was refused because the slot
// moved since the WATCH (a failover, a migration): the keys are to be
// watched again where they are. A command on another slot's key keeps
// its refusal as its reply: watching again would not change it.
func (t txn) slotMoved(cmds []store.Cmd, gcmds []*redis.Cmd) error {
	for i, c := range gcmds {
		err := c.Err()
		if !isRedirect(err) && !isTryAgain(err) {
			continue
		}
		if k := cmds[i].Key(); k != "" && int(store.KeySlot(k)) == t.slot {
			return fmt.Errorf("goredis: %w: %w", store.ErrTxAborted, err)
		}
	}
	return nil
}

// pipe sends cmds in one pipeline on the pinned connection and returns
// their commands and replies.
func (t txn) pipe(ctx context.Context, cmds []store.Cmd) ([]*redis.Cmd, []store.Reply, error) {
	p := t.tx.Pipeline()
	gcmds, guards := queue(ctx, p, cmds, t.s.ap != nil)
	_, execErr := p.Exec(ctx)
	rs, err := t.s.collect(ctx, gcmds, guards, execErr)
	return gcmds, rs, err
}

// doAsking is Do on a migrating slot's target: each command after ASKING.
func (t txn) doAsking(ctx context.Context, cmds []store.Cmd) ([]store.Reply, error) {
	all := make([]store.Cmd, 0, 2*len(cmds))
	for _, c := range cmds {
		all = append(all, store.Cmd{Name: "ASKING"}, c)
	}
	gcmds, rs, err := t.pipe(ctx, all)
	if err != nil {
		return nil, err
	}
	if err := t.slotMoved(all, gcmds); err != nil {
		return nil, err
	}
	for i := range cmds {
		rs[i] = rs[2*i+1]
	}
	return rs[:len(cmds)], nil
}

// execAsking is Exec on a migrating slot's target: ASKING, then the
// transaction, whose commands the server queues on ASKING's leave.
func (t txn) execAsking(ctx context.Context, cmds []store.Cmd) ([]store.Reply, error) {
	all := make([]store.Cmd, 0, len(cmds)+3)
	all = append(all, store.Cmd{Name: "ASKING"}, store.Cmd{Name: "MULTI"})
	all = append(all, cmds...)
	all = append(all, store.Cmd{Name: "EXEC"})
	gcmds, rs, err := t.pipe(ctx, all)
	if err != nil {
		return nil, err
	}
	if rs[1].Err != nil {
		return nil, fmt.Errorf("goredis: MULTI: %w: %w", store.ErrUnknownOutcome, rs[1].Err)
	}
	exec := rs[len(rs)-1]
	switch {
	case errors.Is(exec.Err, store.ErrNil):
		return nil, fmt.Errorf("goredis: %w", store.ErrTxAborted)
	case exec.Err != nil:
		queued := gcmds[2 : len(gcmds)-1]
		if re := movedAway(gcmds[len(gcmds)-1].Err(), cmds, queued, t.slot); re != nil {
			return nil, fmt.Errorf("goredis: %w: %w", store.ErrTxAborted, re)
		}
		return nil, exec.Err
	}
	vals, _ := exec.Val.([]any)
	if len(vals) != len(cmds) {
		return nil, fmt.Errorf("goredis: EXEC returned %d replies for %d commands", len(vals), len(cmds))
	}
	out := make([]store.Reply, len(cmds))
	for i, v := range vals {
		if e, ok := v.(error); ok {
			out[i].Err = e
		} else {
			out[i].Val = v
		}
	}
	return out, nil
}

// movedAway returns the refusal (MOVED, ASK, or TRYAGAIN: keys a slot's
// migration split) for which a Cluster node did not run a transaction
// because the watched keys' slot moved: EXEC's own, or, when EXEC's is
// EXECABORT, that of every command it refused to queue, one of them on a
// key of the watched slot; nil for any other failure (a command on
// another slot's key keeps its refusal: watching again would not change
// it). queued[i] was sent for cmds[i].
func movedAway(execErr error, cmds []store.Cmd, queued []*redis.Cmd, slot int) error {
	if isRedirect(execErr) || isTryAgain(execErr) {
		return execErr
	}
	if !execAborted(execErr) {
		return nil
	}
	var first error
	for i, c := range queued {
		if err := c.Err(); err != nil && !execAborted(err) {
			if !isRedirect(err) && !isTryAgain(err) {
				return nil
			}
			if k := cmds[i].Key(); k == "" || int(store.KeySlot(k)) != slot {
				return nil
			}
			if first == nil {
				first = err
			}
		}
	}
	return first
}

// Exec runs cmds inside MULTI/EXEC on the pinned connection. Watch bounds
// it.
func (t txn) Exec(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("goredis: %w", err) // nothing sent
	}
	if err := store.CheckTxCommands(cmds, true); err != nil {
		return nil, fmt.Errorf("goredis: %w", err) // nothing sent
	}
	if !t.ws.sending() {
		return nil, fmt.Errorf("goredis: %w", errAbandoned) // nothing sent
	}
	if t.asking {
		return t.execAsking(ctx, cmds)
	}
	var gcmds []*redis.Cmd
	var guards []*guard
	_, err := t.tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
		gcmds, guards = queue(ctx, p, cmds, t.s.ap != nil)
		return nil
	})
	if errors.Is(err, redis.TxFailedErr) {
		return nil, fmt.Errorf("%w: %w", store.ErrTxAborted, err)
	}
	if re := movedAway(err, cmds, gcmds, t.slot); re != nil {
		// the keys' slot moved, or is being migrated, since the WATCH:
		// nothing ran, and the keys are to be watched again where they
		// are now
		return nil, fmt.Errorf("goredis: %w: %w", store.ErrTxAborted, re)
	}
	if multiRefused(err) {
		return nil, fmt.Errorf("goredis: MULTI: %w: %w", store.ErrUnknownOutcome, err)
	}
	return t.s.collect(ctx, gcmds, guards, err)
}

// execAborted reports EXEC's refusal of a transaction in which a command
// was refused while queued: nothing ran.
func execAborted(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "EXECABORT")
}

// multiRefused reports a transaction whose MULTI the server refused for
// lack of permission (an ACL without it): go-redis stops reading at
// MULTI's reply and gives its error to every command, as if none ran,
// while the server ran each queued command on its own. The commands may
// have run.
func multiRefused(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := strings.ToLower(re.Error())
	return strings.HasPrefix(msg, "noperm") && strings.Contains(msg, "'multi'")
}

// isReply reports an error that is the server's reply to one command (or a
// nil reply), as opposed to a failure of the round trip.
func isReply(err error) bool {
	if errors.Is(err, redis.Nil) {
		return true
	}
	var re redis.Error
	return errors.As(err, &re)
}

// mapErr maps a go-redis error to the store sentinels. written says whether
// the command reached the wire, so a failure may hide a completed command.
// A failure after ctx ended also wraps ctx's error: with
// ContextTimeoutEnabled go-redis reports a read cut short by the context's
// deadline as a network timeout, which must still match
// context.DeadlineExceeded, as the other adapters' errors do.
func (s *Store) mapErr(ctx context.Context, err error, written bool) error {
	if cerr := ended(ctx); cerr != nil && !isReply(err) && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w (%w)", err, cerr)
	}
	if !isReply(err) && !written {
		err = s.dials.explain(err)
	}
	switch {
	case errors.Is(err, redis.Nil):
		return store.ErrNil
	case errors.Is(err, errResend):
		return fmt.Errorf("goredis: %w: the client tried to re-send a written command", store.ErrUnknownOutcome)
	case errors.Is(err, errTryAgain):
		return fmt.Errorf("goredis: %w", store.ErrTryAgain)
	}
	var re redis.Error
	if errors.As(err, &re) {
		if strings.HasPrefix(err.Error(), "NOSCRIPT") {
			return fmt.Errorf("goredis: %w: %w", store.ErrNoScript, err)
		}
		if isTryAgain(err) {
			return fmt.Errorf("goredis: %w: %w", store.ErrTryAgain, err)
		}
		return fmt.Errorf("goredis: %w", err)
	}
	if written {
		return fmt.Errorf("goredis: %w: %w", store.ErrUnknownOutcome, err)
	}
	return fmt.Errorf("goredis: %w", err)
}

// ended is ctxend.Err: a read deadline set from ctx's expires a moment
// before the context's own timer fires.
var ended = ctxend.Err

// normalise maps go-redis reply values to the store's types: int64, string,
// []any, nil.
func normalise(v any) any {
	switch x := v.(type) {
	case int64, string, nil:
		return v
	case []any:
		for i := range x {
			x[i] = normalise(x[i])
		}
		return v // v already holds x: no new interface value
	case bool:
		if x {
			return int64(1)
		}
		return int64(0)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case map[any]any:
		out := make([]any, 0, 2*len(x))
		for k, e := range x {
			out = append(out, normalise(k), normalise(e))
		}
		return out
	case *big.Int:
		return x.String() // a RESP3 big number, as text like the other adapters
	case redis.Error:
		// an error reply inside an array (a script's {err = ...})
		if strings.HasPrefix(x.Error(), "NOSCRIPT") {
			return fmt.Errorf("goredis: %w: %w", store.ErrNoScript, x)
		}
		return fmt.Errorf("goredis: %w", x)
	}
	return v
}

// Batch implements store.Batcher: the commands go in one go-redis
// pipeline; on a ClusterClient, one pipeline per node of their keys (and
// one for commands without keys), the nodes in parallel, so that a node
// that fails or stays silent fails only its own commands (go-redis's own
// Cluster pipeline ends every node's commands with one node's error). Each
// command keeps its own outcome: one that the pipeline never wrote (its
// node failed first, or the call was given up before it left) fails
// without store.ErrUnknownOutcome.
func (s *Store) Batch(ctx context.Context, cmds []store.Cmd) []store.Reply {
	out := make([]store.Reply, len(cmds))
	if rest, at := store.SplitConnCommands(cmds, out); at != nil {
		for j, r := range s.Batch(ctx, rest) {
			out[at[j]] = r
		}
		return out
	}
	cc, ok := s.c.(*redis.ClusterClient)
	if !ok || len(cmds) < 2 {
		s.batch(ctx, cmds, out)
		return out
	}
	// The nodes of the keys, from the client's slot map (loaded from the
	// Cluster on first use: bounded by ctx, and sending no data command).
	var groups [][]int
	if err := s.bounded(ctx, func() bool { return true }, func() { groups = byNode(ctx, cc, cmds) }); err != nil {
		for i := range out {
			out[i].Err = fmt.Errorf("goredis: %w", err)
		}
		return out
	}
	if len(groups) == 1 {
		s.batch(ctx, cmds, out)
		return out
	}
	var wg sync.WaitGroup
	for _, at := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			group := make([]store.Cmd, len(at))
			for j, i := range at {
				group[j] = cmds[i]
			}
			rs := make([]store.Reply, len(at))
			s.batch(ctx, group, rs)
			for j, i := range at {
				out[i] = rs[j]
			}
		}()
	}
	wg.Wait()
	return out
}

// byNode groups the indexes of cmds by the master that serves their first
// key (commands without keys, or whose node is not known, in a group of
// their own), in the order of first appearance.
func byNode(ctx context.Context, cc *redis.ClusterClient, cmds []store.Cmd) [][]int {
	return store.Group(cmds, func(c store.Cmd) string {
		if k := c.Key(); k != "" {
			if m, err := cc.MasterForKey(ctx, k); err == nil {
				return "node " + m.Options().Addr
			}
		}
		return ""
	})
}

// batch runs cmds in one pipeline and writes their replies to out.
func (s *Store) batch(ctx context.Context, cmds []store.Cmd, out []store.Reply) {
	if len(cmds) == 0 {
		return
	}
	p := s.c.Pipeline()
	gcmds, guards := queue(ctx, p, cmds, s.ap != nil)
	var execErr error
	berr := s.bounded(ctx, func() bool { return sealAll(guards, cmds) }, func() { _, execErr = p.Exec(ctx) })
	for i, c := range gcmds {
		g := guards[i]
		if berr != nil {
			// Given up at the deadline: a command whose guard is sealed
			// will never be written.
			switch {
			case g.seal():
				out[i].Err = fmt.Errorf("goredis: %w: %w", errAbandoned, s.dials.explain(ended(ctx)))
			case errors.Is(berr, store.ErrUnknownOutcome):
				out[i].Err = fmt.Errorf("goredis: %w", berr)
			default:
				out[i].Err = fmt.Errorf("goredis: %w: %w", store.ErrUnknownOutcome, berr)
			}
			continue
		}
		v, err := c.Result()
		switch {
		case readThenResent(v, err):
			out[i].Val = normalise(v)
		case v == nil && err == nil:
			e := execErr
			if e == nil {
				e = errors.New("no reply")
			}
			out[i].Err = s.mapErr(ctx, e, g.written())
		case err != nil && !isReply(err):
			out[i].Err = s.mapErr(ctx, err, g.written())
		case err != nil:
			out[i].Err = s.mapErr(ctx, err, false)
		default:
			out[i].Val = normalise(v)
		}
	}
}
