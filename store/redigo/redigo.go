package redigo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"

	"github.com/quotagate/limiter/internal/argcache"
	"github.com/quotagate/limiter/internal/share"
	"github.com/quotagate/limiter/store"
)

// Pool is where a Store gets its connections. *redis.Pool satisfies it; a
// Redis Cluster does through Cluster. The Store closes every connection it
// gets, which returns it to the pool.
type Pool interface {
	GetContext(ctx context.Context) (redis.Conn, error)
}

// Store adapts a redigo Pool to store.Store and store.Watcher. It is safe for
// concurrent use.
type Store struct {
	p Pool
	// cluster is set when p is a Cluster: the Store then follows MOVED, ASK
	// and TRYAGAIN replies, which mean the command did not run.
	cluster *redisc.Cluster
	// nodes maps each hash slot to its master's address, for Batch to send
	// one pipeline per server (redisc keeps its own map to itself); nil
	// until a Batch loads it, and again after a Batch met a redirection.
	nodes atomic.Pointer[[redisc.HashSlots]string]
	// boxes holds recent integer arguments as interface values.
	boxes argcache.Boxes
	// shareN is WithSharedPipelines' n; gate shares round trips of script
	// calls on one server, nil when they are not shared (and on a
	// Cluster); masters does per master on a Cluster, nil when not.
	shareN  int
	gate    *share.Gate[*sharedCall]
	masters *masterGates
	// proxy: WithShardingProxy was given.
	proxy bool
}

var (
	_ store.Store        = (*Store)(nil)
	_ store.Watcher      = (*Store)(nil)
	_ store.Int64sEvaler = (*Store)(nil)
	_ store.OneServer    = (*Store)(nil)
)

// WithShardingProxy says that the pool's connections go to a proxy that
// spreads keys over several servers by their hash slot or tag (Envoy's
// Redis proxy, twemproxy, a managed "cluster proxy") and routes a script
// call by its first key. Without it a Store on a pool that is not a
// Cluster reports that one server holds every key (store.OneServer), and
// limiter.AllowMany decides asks of different subjects in one script
// call, which such a proxy would send to one server only.
func WithShardingProxy() Option {
	return func(s *Store) { s.proxy = true }
}

// OneServer implements store.OneServer: true for a pool that is not a
// Cluster unless WithShardingProxy was given.
func (s *Store) OneServer() bool { return s.cluster == nil && !s.proxy }

// New returns a Store on p, or nil when p is nil (limiter.New then reports
// limiter.ErrNilStore).
func New(p Pool, opts ...Option) *Store {
	s := &Store{p: p, shareN: DefaultSharedPipelines}
	switch x := p.(type) {
	case nil:
		return nil
	case *redis.Pool:
		if x == nil {
			return nil
		}
	case clusterPool:
		s.cluster = x.c
	}
	for _, o := range opts {
		if o != nil { // an option chosen conditionally and left unset
			o(s)
		}
	}
	switch {
	case s.shareN <= 0:
	case s.cluster == nil:
		s.gate = share.NewGate(s.shareN, s.sendShared)
	default:
		s.masters = &masterGates{gates: share.NewNodes(s.shareN, s.sendShared)}
	}
	return s
}

// Pool returns the wrapped pool.
func (s *Store) Pool() Pool { return s.p }

// Cluster returns a Pool of connections to the Redis Cluster c, or nil when
// c is nil. A Store on it binds each call's connection to the node that
// serves the call's first key (all keys of one call share a slot), and sends
// a call again only when every reply was a MOVED or ASK redirection: the
// server refused it, so it did not run. A TRYAGAIN reply is the call's
// store.ErrTryAgain. A lost reply is never re-sent.
//
// redisc has no GetContext: waiting for a node's pooled connection is
// bounded by c.PoolWaitTime, not by the call's context.
func Cluster(c *redisc.Cluster) Pool {
	if c == nil {
		return nil
	}
	return clusterPool{c}
}

type clusterPool struct{ c *redisc.Cluster }

// GetContext returns an unbound cluster connection; the Store binds it.
func (p clusterPool) GetContext(context.Context) (redis.Conn, error) {
	c := p.c.Get()
	if err := c.Err(); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// binder is a connection that can be pinned to the node of a key's slot
// (*redisc.Conn).
type binder interface {
	Bind(keys ...string) error
}

// maxRedirects bounds how often one call follows MOVED or ASK (go-redis's
// default MaxRedirects). A call refused with TRYAGAIN (a multi-key command
// during a slot's migration) is not sent again here: its reply is
// store.ErrTryAgain, on which store.Script sends the call again after a
// pause, with redirections of its own to follow (here a TRYAGAIN answered
// before an ASK used up the budget the ASK needed).
const maxRedirects = 3

// conn gets a connection for a call whose first key is key. On a Cluster it
// is bound to key's node, or, after a redirection that names a node to
// dial (see hop), dialled to it.
func (s *Store) conn(ctx context.Context, key string, h hop) (redis.Conn, error) {
	if h.addr != "" {
		// The target of an ASK may not even be in the slot map yet; the
		// redirection is transient, so one direct connection does.
		return redis.DialContext(ctx, "tcp", h.addr, s.cluster.DialOptions...)
	}
	c, err := s.p.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	if key != "" {
		if b, ok := c.(binder); ok {
			if err := b.Bind(key); err != nil {
				_ = c.Close()
				return nil, err
			}
		}
	}
	return c, nil
}

// EvalSha implements store.Store.
func (s *Store) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	return s.eval(ctx, "EVALSHA", sha, keys, args)
}

// Eval implements store.Store.
func (s *Store) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	return s.eval(ctx, "EVAL", src, keys, args)
}

func (s *Store) eval(ctx context.Context, name, script string, keys []string, args []any) (any, error) {
	a := scriptArgs(script, keys, len(args))
	a = append(a, args...)
	floatTexts(a[len(a)-len(args):])
	v, err := s.script(ctx, firstKey(keys), name, a)
	if err != nil {
		return nil, err
	}
	r := toReply(v)
	return r.Val, r.Err
}

// EvalShaInt64s implements store.Int64sEvaler: the integers go straight
// into the command's argument array.
func (s *Store) EvalShaInt64s(ctx context.Context, sha string, keys []string, args []int64, dst []int64) ([]int64, error) {
	return s.evalInt64s(ctx, "EVALSHA", sha, keys, args, dst)
}

// EvalInt64s implements store.Int64sEvaler.
func (s *Store) EvalInt64s(ctx context.Context, src string, keys []string, args []int64, dst []int64) ([]int64, error) {
	return s.evalInt64s(ctx, "EVAL", src, keys, args, dst)
}

func (s *Store) evalInt64s(ctx context.Context, name, script string, keys []string, args []int64, dst []int64) ([]int64, error) {
	a := scriptArgs(script, keys, len(args))
	for _, n := range args {
		a = append(a, s.boxes.Box(n))
	}
	v, err := s.script(ctx, firstKey(keys), name, a)
	if err != nil {
		return nil, err
	}
	r := toReply(v)
	if r.Err != nil {
		return nil, r.Err
	}
	nums, err := store.AppendInt64s(dst, r.Val)
	if err != nil {
		return nil, fmt.Errorf("redigo: %w", err)
	}
	return nums, nil
}

// floatTexts writes each float64 of args as the other adapters do, in
// plain decimals ('f', the fewest digits): redigo's own 'g' format would
// send 1e6 as "1e+06", which Redis refuses where it reads an integer. A
// []byte becomes a string of its own: redigo may still be writing a
// command after the call has returned (DoContext writes on a goroutine of
// its own, and a shared pipeline writes a call its caller gave up on), and
// the caller may by then reuse its buffer (a store keeps none of the
// slices it is given).
func floatTexts(args []any) {
	for i, v := range args {
		switch v := v.(type) {
		case float64:
			args[i] = strconv.FormatFloat(v, 'f', -1, 64)
		case []byte:
			args[i] = string(v)
		}
	}
}

// withFloatTexts is floatTexts on a copy of args, made only when they hold
// a float64 (the caller's slice is left as it is).
func withFloatTexts(args []any) []any {
	for _, v := range args {
		if _, ok := v.(float64); ok {
			args = slices.Clone(args)
			floatTexts(args)
			return args
		}
	}
	return args
}

// scriptArgs returns the arguments of EVAL or EVALSHA up to the keys, with
// room for nargs more.
func scriptArgs(script string, keys []string, nargs int) []any {
	a := make([]any, 0, 2+len(keys)+nargs)
	a = append(a, script, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	return a
}

func firstKey(keys []string) string {
	if len(keys) > 0 {
		return keys[0]
	}
	return ""
}

// call sends one command and returns its raw reply: a redis.Error reply is
// returned as the value, a failed round trip as the error.
func (s *Store) call(ctx context.Context, key, name string, args []any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, fail(ctx, err, false)
	}
	return s.callFrom(ctx, key, name, args, 0, hop{})
}

// callFrom is call from its attempt-th sending, sent as h says.
func (s *Store) callFrom(ctx context.Context, key, name string, args []any, attempt int, h hop) (any, error) {
	for ; ; attempt++ {
		c, err := s.conn(ctx, key, h)
		if err != nil {
			return nil, fail(ctx, err, false)
		}
		var v any
		if !h.asking {
			v, err = do1(ctx, c, name, args)
			if re, ok := err.(redis.Error); ok {
				v, err = re, nil
			}
		} else { // ASKING, then the command: its own reply counts
			var raw []any
			if raw, err = pipe(ctx, c, []store.Cmd{{Name: name, Args: args}}, true); err == nil {
				v = raw[0]
			}
		}
		_ = c.Close() // returns c to the pool, or discards it after an error
		if err != nil {
			return nil, fail(ctx, err, true)
		}
		if s.cluster == nil {
			return v, nil
		}
		next, again := s.redirect(attempt, h, v)
		if !again {
			return v, nil
		}
		h = next
	}
}

// Do implements store.Store: the commands go in one pipeline, on one
// connection (on a Cluster, the node of the first key).
func (s *Store) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if err := store.CheckConnCommands(cmds); err != nil {
		return nil, fmt.Errorf("redigo: %w", err) // nothing sent
	}
	switch len(cmds) {
	case 0:
		return nil, nil
	case 1:
		// (float64 arguments as their decimal text, as in a pipeline:
		// redigo would write 1e+06)
		var args []any
		if ctx.Done() != nil {
			// DoContext writes on a goroutine of its own, which may
			// outlive the call: a copy, not the caller's slice
			args = slices.Clone(cmds[0].Args)
			floatTexts(args)
		} else {
			args = withFloatTexts(cmds[0].Args)
		}
		v, err := s.call(ctx, cmds[0].Key(), cmds[0].Name, args)
		if err != nil {
			return nil, err
		}
		return []store.Reply{toReply(v)}, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fail(ctx, err, false)
	}
	return s.doFrom(ctx, cmds, 0, hop{})
}

// doFrom is Do from its attempt-th sending. On a Cluster, a pipeline (not a
// transaction) some of whose commands a node refused with MOVED or ASK
// (keys a slot's migration has moved, beside keys it has not) while it ran
// the others has the refused ones sent on, as a pipeline of their own
// whose failure is theirs: go-redis and rueidis follow each command's
// redirection the same way.
func (s *Store) doFrom(ctx context.Context, cmds []store.Cmd, attempt int, h hop) ([]store.Reply, error) {
	key := ""
	for _, c := range cmds {
		if key = c.Key(); key != "" {
			break
		}
	}
	tx := store.IsTx(cmds)
	for ; ; attempt++ {
		c, err := s.conn(ctx, key, h)
		if err != nil {
			return nil, fail(ctx, err, false)
		}
		raw, err := pipe(ctx, c, cmds, h.asking)
		_ = c.Close()
		if err != nil {
			return nil, fail(ctx, err, true)
		}
		refusals := raw
		if tx {
			refusals = txRefusals(raw)
		}
		next, again := s.redirect(attempt, h, refusals...)
		if again {
			h = next
			continue
		}
		rs := replies(raw)
		if tx || s.cluster == nil || attempt >= maxRedirects {
			return rs, nil
		}
		var refused []int
		var moved []any
		for i, v := range raw {
			if kind, _ := refusal(v); kind == "MOVED" || kind == "ASK" {
				refused = append(refused, i)
				moved = append(moved, v)
			}
		}
		next, again = s.redirect(attempt, h, moved...)
		if !again {
			return rs, nil
		}
		rest := make([]store.Cmd, len(refused))
		for j, i := range refused {
			rest[j] = cmds[i]
		}
		more, err := s.doFrom(ctx, rest, attempt+1, next)
		for j, i := range refused {
			if err != nil {
				rs[i] = store.Reply{Err: err}
			} else {
				rs[i] = more[j]
			}
		}
		return rs, nil
	}
}

// txRefusals returns the error replies that say why a transaction's
// commands did not run, from its raw replies (MULTI's, each command's,
// EXEC's): none when MULTI was refused or EXEC ran them; EXEC's refusal
// (a slot that moved after the commands were queued); or the refusals of
// the commands the server would not queue (MOVED or ASK for a key not on
// it), after which it discarded the transaction (EXECABORT).
func txRefusals(raw []any) []any {
	n := len(raw)
	if n < 2 {
		return nil
	}
	if _, ok := raw[0].(redis.Error); ok {
		return nil
	}
	exec, ok := raw[n-1].(redis.Error)
	if !ok {
		return nil
	}
	if !strings.HasPrefix(string(exec), "EXECABORT") {
		return raw[n-1:]
	}
	var out []any
	for _, v := range raw[1 : n-1] {
		if _, ok := v.(redis.Error); ok {
			out = append(out, v)
		}
	}
	return out
}

// hop says where a call's next send goes after a redirection: to the
// pool's connection for its key (addr ""), or to a connection dialled to
// addr, each command preceded by ASKING when asking (after ASK). moved is
// the node the redirection was a MOVED to.
type hop struct {
	addr   string
	asking bool
	moved  string
}

// redirect decides whether a call whose raw replies are vs, sent as last
// says, may be sent again: only on a Cluster, only when every reply refused
// its command with the same MOVED or ASK (so nothing ran), and at most
// maxRedirects times; next says how.
func (s *Store) redirect(attempt int, last hop, vs ...any) (next hop, again bool) {
	if s.cluster == nil || attempt >= maxRedirects || len(vs) == 0 {
		return hop{}, false
	}
	kind, addr := refusal(vs[0])
	if kind == "" || kind == "TRYAGAIN" {
		return hop{}, false
	}
	if kind == "MOVED" {
		// the slot has a new owner: Batch's slot map is out of date
		s.nodes.Store(nil)
	}
	for _, v := range vs[1:] {
		if k, a := refusal(v); k != kind || a != addr {
			return hop{}, false
		}
	}
	if kind == "ASK" {
		return hop{addr: addr, asking: true}, true
	}
	if last.moved == addr && last.addr == "" {
		// Moved to addr twice through the pool: redisc updated its
		// slot map after the first MOVED, and a connection bound to the
		// key went to another node anyway, which redisc does when it
		// cannot reach addr (a master that died). Dial addr itself: a
		// failure to connect is then the call's error, not a MOVED.
		return hop{addr: addr, moved: addr}, true
	}
	// redisc updated its slot map when it read the MOVED reply, so the
	// next connection bound to the key goes to the new owner.
	return hop{moved: addr}, true
}

// refusal returns the kind (MOVED, ASK, TRYAGAIN) and target of a reply
// with which a Cluster node refused a command, or "".
func refusal(v any) (kind, addr string) {
	re, ok := v.(redis.Error)
	if !ok {
		return "", ""
	}
	if r := redisc.ParseRedir(re); r != nil {
		return r.Type, r.Addr
	}
	if redisc.IsTryAgain(re) {
		return "TRYAGAIN", ""
	}
	return "", ""
}

// errNoContext is redigo's error for a connection without
// redis.ConnWithContext (a pooled connection whose Dial returned one),
// returned before anything is written.
var errNoContext = func() error {
	_, err := redis.DoContext(nil, context.Background(), "")
	return err
}()

// errNoTimeout is redigo's error for a connection without
// redis.ConnWithTimeout (a pooled connection whose Dial returned a wrapper
// with neither interface), returned before anything is written or read:
// such a connection is bounded by its own read timeout alone.
var errNoTimeout = func() error {
	_, err := redis.DoWithTimeout(nil, time.Second, "")
	return err
}()

// do1 sends one command on c and reads its reply, within ctx's deadline.
func do1(ctx context.Context, c redis.Conn, name string, args []any) (any, error) {
	if ctx.Done() == nil {
		return c.Do(name, args...)
	}
	if cc, ok := c.(redis.ConnWithContext); ok {
		v, err := cc.DoContext(ctx, name, args...)
		if err != errNoContext {
			return v, err
		}
	}
	if dl, ok := ctx.Deadline(); ok {
		if ct, ok := c.(redis.ConnWithTimeout); ok {
			v, err := ct.DoWithTimeout(until(dl), name, args...)
			if err != errNoTimeout {
				return v, err
			}
		}
	}
	return c.Do(name, args...)
}

// pipe sends cmds on c in one round trip and returns their raw replies, a
// redis.Error reply in its command's place. asking precedes every command
// with ASKING (after an ASK redirection), or a transaction (MULTI ...
// EXEC) as a whole: the server keeps ASKING's leave for the commands a
// MULTI queues, until EXEC. Any error may follow a write.
func pipe(ctx context.Context, c redis.Conn, cmds []store.Cmd, asking bool) ([]any, error) {
	tx := asking && store.IsTx(cmds)
	for i, cmd := range cmds {
		if asking && (!tx || i == 0) {
			if err := c.Send("ASKING"); err != nil {
				return nil, err
			}
		}
		if err := c.Send(cmd.Name, withFloatTexts(cmd.Args)...); err != nil {
			return nil, err
		}
	}
	n := len(cmds)
	switch {
	case tx:
		n++
	case asking:
		n *= 2
	}
	raw, err := receive(ctx, c, n)
	if err != nil {
		return nil, err
	}
	switch {
	case tx:
		raw = raw[1:]
	case asking:
		for i := range cmds {
			raw[i] = raw[2*i+1]
		}
		raw = raw[:len(cmds)]
	}
	return raw, nil
}

// receive flushes the n commands sent on c and reads their replies.
//
// A redigo connection does it in one call, Do(""), bounded by ctx with
// DoContext. That call takes the count of pending replies under the
// connection's lock before any I/O, so when ctx ends first, the pool's
// Close (which also calls Do("")) and the abandoned read never both read
// the connection. Other connections (a redisc.Conn) read reply by reply:
// redisc learns a slot's new owner from each MOVED it returns.
func receive(ctx context.Context, c redis.Conn, n int) ([]any, error) {
	if cc, ok := c.(redis.ConnWithContext); ok {
		var v any
		var err error
		if ctx.Done() == nil {
			v, err = c.Do("")
		} else {
			v, err = cc.DoContext(ctx, "")
		}
		if err != errNoContext {
			if err != nil {
				return nil, err
			}
			raw, ok := v.([]any)
			if !ok || len(raw) != n {
				return nil, fmt.Errorf("%d replies for %d commands", len(raw), n)
			}
			return raw, nil
		}
	}
	if err := c.Flush(); err != nil {
		return nil, err
	}
	raw := make([]any, n)
	for i := range raw {
		v, err := receive1(ctx, c)
		if err != nil {
			re, ok := err.(redis.Error)
			if !ok {
				return nil, err
			}
			v = re
		}
		raw[i] = v
	}
	return raw, nil
}

// receive1 reads one reply, by ctx's deadline when the connection can.
func receive1(ctx context.Context, c redis.Conn) (any, error) {
	if dl, ok := ctx.Deadline(); ok {
		if ct, ok := c.(redis.ConnWithTimeout); ok {
			v, err := ct.ReceiveWithTimeout(until(dl))
			if err != errNoTimeout {
				return v, err
			}
		}
	}
	return c.Receive()
}

// until is the time left before dl as a read timeout. redigo reads a zero
// timeout as none and redisc a negative one as the default, so a deadline
// already past is one nanosecond: the read fails at once and the connection
// is discarded.
func until(dl time.Time) time.Duration {
	return max(time.Until(dl), time.Nanosecond)
}

// fail maps a failed round trip. sent says whether a command may have
// reached the server, so that the call may have run. When ctx is done (or
// its deadline passed) the error wraps ctx's error too.
func fail(ctx context.Context, err error, sent bool) error {
	cerr := ctx.Err()
	if cerr == nil {
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
			cerr = context.DeadlineExceeded
		}
	}
	if cerr != nil && !errors.Is(err, cerr) {
		if sent {
			return fmt.Errorf("redigo: %w: %w: %w", store.ErrUnknownOutcome, cerr, err)
		}
		return fmt.Errorf("redigo: %w: %w", cerr, err)
	}
	if sent {
		return fmt.Errorf("redigo: %w: %w", store.ErrUnknownOutcome, err)
	}
	return fmt.Errorf("redigo: %w", err)
}

// replyErr maps a Redis error reply: NOSCRIPT is store.ErrNoScript, a
// Cluster's TRYAGAIN (a reply to the call's last send) store.ErrTryAgain.
func replyErr(re redis.Error) error {
	switch {
	case strings.HasPrefix(string(re), "NOSCRIPT"):
		return fmt.Errorf("redigo: %w: %w", store.ErrNoScript, re)
	case redisc.IsTryAgain(re):
		return fmt.Errorf("redigo: %w: %w", store.ErrTryAgain, re)
	}
	return fmt.Errorf("redigo: %w", re)
}

func replies(raw []any) []store.Reply {
	out := make([]store.Reply, len(raw))
	for i, v := range raw {
		out[i] = toReply(v)
	}
	return out
}

// toReply maps one raw reply: nil to ErrNil, an error reply to Err, any
// other value normalised.
func toReply(v any) store.Reply {
	switch x := v.(type) {
	case nil:
		return store.Reply{Err: store.ErrNil}
	case redis.Error:
		return store.Reply{Err: replyErr(x)}
	}
	return store.Reply{Val: normalise(v)}
}

// normalise maps redigo reply values to the store's types: bulk strings
// ([]byte) to string, arrays to []any in place; int64, string (status
// replies) and nil stay. An error inside an array (EXEC) stays an error.
func normalise(v any) any {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case []any:
		for i := range x {
			x[i] = normalise(x[i])
		}
		return v // v already holds x: no new interface value
	case redis.Error:
		return replyErr(x)
	}
	return v
}

// Batch implements store.Batcher: on a single server, one pipeline on one
// connection; on a Cluster, one pipeline per server, the servers in
// parallel (the servers of the slots from CLUSTER SLOTS, read on the first
// Batch and again after any call meets a MOVED). A command refused with
// MOVED or ASK (it did not run: the slot moved) is sent again with the
// others of its slot, following the redirection as Do does; one refused
// with TRYAGAIN has store.ErrTryAgain. A failed round trip is the failure
// of the commands it carried.
func (s *Store) Batch(ctx context.Context, cmds []store.Cmd) []store.Reply {
	out := make([]store.Reply, len(cmds))
	if rest, at := store.SplitConnCommands(cmds, out); at != nil {
		for j, r := range s.Batch(ctx, rest) {
			out[at[j]] = r
		}
		return out
	}
	if s.cluster == nil || len(cmds) < 2 {
		at := make([]int, len(cmds))
		for i := range at {
			at[i] = i
		}
		s.batchGroup(ctx, cmds, at, out)
		return out
	}
	var groups [][]int
	if nodes := s.slotNodes(ctx); nodes != nil {
		groups = store.Group(cmds, func(c store.Cmd) string {
			if k := c.Key(); k != "" {
				return nodes[redisc.Slot(k)]
			}
			return ""
		})
	} else {
		groups = store.Group(cmds, func(c store.Cmd) string { return fmt.Sprint(redisc.Slot(c.Key())) })
	}
	var wg sync.WaitGroup
	for _, at := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.batchGroup(ctx, cmds, at, out)
		}()
	}
	wg.Wait()
	return out
}

// batchGroup sends the commands of cmds at the indexes at in one pipeline
// (Do: on the node of the first key) and writes their replies to out. On a
// Cluster, the commands refused with a redirection are sent again, each
// slot's with Do, which follows it.
func (s *Store) batchGroup(ctx context.Context, cmds []store.Cmd, at []int, out []store.Reply) {
	if len(at) == 0 {
		return
	}
	rs, err := s.Do(ctx, cmdsAt(cmds, at)...)
	var moved []int
	for j, i := range at {
		switch {
		case err != nil:
			out[i].Err = err
		case s.cluster != nil && redirected(rs[j].Err):
			moved = append(moved, i)
		default:
			out[i] = rs[j]
		}
	}
	if len(moved) == 0 {
		return
	}
	s.nodes.Store(nil) // the slots moved: read them again next time
	for _, again := range store.Group(cmdsAt(cmds, moved), func(c store.Cmd) string { return fmt.Sprint(redisc.Slot(c.Key())) }) {
		sub := make([]int, len(again))
		for j, k := range again {
			sub[j] = moved[k]
		}
		rs, err := s.Do(ctx, cmdsAt(cmds, sub)...)
		for j, i := range sub {
			if err != nil {
				out[i].Err = err
			} else {
				out[i] = rs[j]
			}
		}
	}
}

// cmdsAt returns the commands of cmds at the indexes at.
func cmdsAt(cmds []store.Cmd, at []int) []store.Cmd {
	out := make([]store.Cmd, len(at))
	for j, i := range at {
		out[j] = cmds[i]
	}
	return out
}

// redirected reports a command refused with MOVED or ASK: it did not run,
// and another node takes it.
func redirected(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	kind, _ := refusal(re)
	return kind == "MOVED" || kind == "ASK"
}

// slotNodes returns the master's address of every hash slot, reading them
// (CLUSTER SLOTS) when not known; nil when they cannot be read, or leave a
// slot without a master.
func (s *Store) slotNodes(ctx context.Context) *[redisc.HashSlots]string {
	if nodes := s.nodes.Load(); nodes != nil {
		return nodes
	}
	// A quarter of the time left, at most a second: redisc sends CLUSTER
	// SLOTS to one node (the owner of slot("SLOTS")), and a batch whose
	// map cannot be read goes one pipeline per slot instead, so that node
	// stalled must not take the batch's whole deadline from the others.
	wait := time.Second
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)/4)
	}
	sctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	c, err := s.conn(sctx, "", hop{})
	if err != nil {
		return nil
	}
	v, err := do1(sctx, c, "CLUSTER", []any{"SLOTS"})
	_ = c.Close()
	ranges, ok := v.([]any)
	if err != nil || !ok {
		return nil
	}
	nodes := new([redisc.HashSlots]string)
	for _, r := range ranges {
		f, ok := r.([]any)
		if !ok || len(f) < 3 {
			return nil
		}
		first, err1 := redis.Int(f[0], nil)
		last, err2 := redis.Int(f[1], nil)
		master, ok := f[2].([]any)
		if err1 != nil || err2 != nil || !ok || len(master) < 2 || first < 0 || last >= redisc.HashSlots || first > last {
			return nil
		}
		host, err1 := redis.String(master[0], nil)
		port, err2 := redis.Int(master[1], nil)
		if err1 != nil || err2 != nil {
			return nil
		}
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		for slot := first; slot <= last; slot++ {
			nodes[slot] = addr
		}
	}
	for _, addr := range nodes {
		if addr == "" {
			return nil
		}
	}
	s.nodes.Store(nodes)
	return nodes
}
