package rueidis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rd "github.com/redis/rueidis"

	"github.com/quotagate/limiter/store"
)

// Watch notes for maintainers:
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
// (v1.0.79) sends UNSUBSCRIBE, PUNSUBSCRIBE, SUNSUBSCRIBE (each with a
// PING) and DISCARD on a dedicated connection handed back to its pool,
// and panics, ending the process, when the server answers them with BUSY
// errors ("protocol bug, message handled out of order": it matches the
// replies to its commands wrongly). A hand-back runs whenever it is
// scheduled, so no check of the server before it closes that window. So
// the Store never hands a live dedicated connection back: Watch keeps them
// itself for the next Watch (which also spares the server those commands
// at each transaction), up to maxIdle, and closes the others (a closed
// connection is dropped by rueidis, sending nothing). Calls during BUSY
// fail with the server's error, which names BUSY.
//
// On a Cluster, a dedicated connection of the Cluster client is pinned to
// the slot of its first command and could not serve the next Watch's
// keys. So Watch takes its connections from each node's own client
// (Client.Nodes), which are not pinned, keeps them per node, and learns
// which node owns a slot from the MOVED a node answers to a WATCH of a
// key it does not serve (a slot not learned yet is tried on any node:
// one more round trip, once per slot). A WATCH refused with MOVED watched
// nothing, and the connection is kept. A MOVED to a node rueidis does
// not know yet (one that joined after rueidis read the slots) is followed
// by a read of the key through the Cluster client, which makes rueidis
// follow it too and add the node; should rueidis still not list the node
// (it lists a master demoted by a failover again only at its next
// refresh), the Watch pauses for it, about 2 s at most, and then goes
// through the Cluster client's own dedicated connection, which is closed
// afterwards, never handed back.

// maxIdle is the most dedicated connections a Store keeps for the next
// Watch by default (WithWatchConns): as many as rueidis's pool would keep,
// its default BlockingPoolSize. A Store keeps no more than were in use at
// once. idleFor is how long one is kept unused before it is closed.
const (
	maxIdle = rd.DefaultPoolSize
	idleFor = 30 * time.Second
)

// idleConns is a Store's dedicated connections kept for the next Watch,
// and the Watches waiting for one. A Watch that finds none kept waits for
// the next connection either rueidis makes (it asks for one when fewer are
// being made than Watches wait) or another Watch finishes with, whichever
// comes first: connections the Store keeps (which hold slots of rueidis's
// pool) never keep a Watch waiting for a slot of a full pool, and a
// connection rueidis makes for a Watch served meanwhile is not lost.
type idleConns struct {
	max  int    // the most kept
	addr string // a Cluster node's address
	// dedicate makes a dedicated connection (the client's Dedicate, or a
	// Cluster node's).
	dedicate func() (rd.DedicatedClient, func())
	mu       sync.Mutex
	conns    []idleConn // the most recently parked last
	waiters  []waiter   // Watches waiting, the longest waiting first
	dialing  int        // connections being made by rueidis
	closed   bool
	// sweep closes the connections kept unused for idleFor (nil while
	// none is kept): a Store whose Watches stopped (a quiet service, a
	// Cluster node that no longer serves their keys) does not keep them
	// open for good.
	sweep *time.Timer
	// keep, when set, is idleFor for this pool (tests).
	keep time.Duration
}

// idleFor is how long p keeps a connection unused.
func (p *idleConns) idleFor() time.Duration {
	if p.keep > 0 {
		return p.keep
	}
	return idleFor
}

type idleConn struct {
	dc      rd.DedicatedClient
	release func()
	at      time.Time
}

// waiter is a Watch waiting for a connection, given on ch. fresh: it
// takes only one rueidis has just made (see get).
type waiter struct {
	ch    chan idleConn
	fresh bool
}

// get returns the most recently parked connection still young enough
// (closing those that are not), or else registers the caller as waiting:
// park or made gives it the next connection on ch, and dial tells the
// caller to ask rueidis for a new one (then given through made). fresh:
// the caller needs a connection that was never used (one kept failed: the
// server may have closed them all, restarting or timing them out, and
// those other Watches hold too); every kept one is closed, freeing its
// slot of rueidis's pool for the new one. (No connection is kept while a
// Watch waits: park gives it to the Watch, or closes it while a fresh one
// waits. So a Watch never waits for a slot a kept connection holds.)
func (p *idleConns) get(fresh bool) (c idleConn, ch chan idleConn, dial bool) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.conns) > 0 {
		c := p.conns[len(p.conns)-1]
		p.conns = p.conns[:len(p.conns)-1]
		if !fresh && now.Sub(c.at) < p.idleFor() {
			return c, nil, false
		}
		go drop(c.dc, c.release)
	}
	ch = make(chan idleConn, 1)
	p.waiters = append(p.waiters, waiter{ch, fresh})
	if p.dialing < len(p.waiters) {
		p.dialing++
		dial = true
	}
	return idleConn{}, ch, dial
}

// park gives an un-watched, healthy connection a Watch finished with to
// the Watch that has waited longest for one (but for a fresh one: it may
// be as dead as the one that Watch's WATCH failed on), or keeps it for the
// next Watch, or closes it when the Store keeps enough (or was closed), or
// while a fresh Watch waits (whose new connection may need its slot).
func (p *idleConns) park(dc rd.DedicatedClient, release func()) {
	p.mu.Lock()
	p.parkLocked(dc, release, false)
}

// made gives a connection rueidis made for a waiting Watch (get's dial) to
// the fresh Watch that has waited longest, else to the Watch that has
// waited longest, else keeps it as park does.
func (p *idleConns) made(dc rd.DedicatedClient, release func()) {
	p.mu.Lock()
	p.dialing--
	p.parkLocked(dc, release, true)
}

// parkLocked is park (new: made) with p.mu held; it unlocks p.mu.
func (p *idleConns) parkLocked(dc rd.DedicatedClient, release func(), new bool) {
	now := time.Now()
	var pick int
	if new {
		// the fresh Watch waiting longest, else the Watch waiting longest
		pick = slices.IndexFunc(p.waiters, func(w waiter) bool { return w.fresh })
		if pick < 0 && len(p.waiters) > 0 {
			pick = 0
		}
	} else {
		pick = slices.IndexFunc(p.waiters, func(w waiter) bool { return !w.fresh })
	}
	if pick >= 0 {
		w := p.waiters[pick]
		p.waiters = slices.Delete(p.waiters, pick, pick+1)
		w.ch <- idleConn{dc, release, now} // (buffered for one, and given one)
		p.mu.Unlock()
		return
	}
	p.dropIdleLocked(now)
	if !p.closed && len(p.conns) < p.max && len(p.waiters) == 0 {
		p.conns = append(p.conns, idleConn{dc, release, now})
		if p.sweep == nil {
			p.sweep = time.AfterFunc(p.idleFor(), p.expire)
		}
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	go drop(dc, release)
}

// dropIdleLocked closes the connections kept unused for idleFor at now
// (the oldest are first); p.mu is held.
func (p *idleConns) dropIdleLocked(now time.Time) {
	for len(p.conns) > 0 && now.Sub(p.conns[0].at) >= p.idleFor() {
		go drop(p.conns[0].dc, p.conns[0].release)
		p.conns[0] = idleConn{}
		p.conns = p.conns[1:]
	}
}

// expire is sweep's: it closes the connections kept unused for idleFor,
// and comes back when the oldest of the others is.
func (p *idleConns) expire() {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropIdleLocked(now)
	if len(p.conns) == 0 || p.sweep == nil {
		p.sweep = nil
		return
	}
	p.sweep.Reset(p.idleFor() - now.Sub(p.conns[0].at))
}

// conn returns a dedicated connection for a Watch: one kept (unless
// fresh), or the first one made or handed back after (see idleConns). A
// Watch asking rueidis directly could wait behind the Store's own
// requests for a slot of a full pool, whose connections, made for Watches
// served meanwhile, the Store would keep.
func (p *idleConns) conn(fresh bool) (rd.DedicatedClient, func()) {
	if p.max == 0 {
		return p.dedicate()
	}
	c, ch, dial := p.get(fresh)
	if ch == nil {
		return c.dc, c.release
	}
	if dial {
		go func() {
			dc, release := p.dedicate()
			p.made(dc, release)
		}()
	}
	c = <-ch
	return c.dc, c.release
}

// close closes every kept connection; later ones are closed as they come.
func (p *idleConns) close() {
	p.mu.Lock()
	conns := p.conns
	p.conns, p.closed = nil, true
	if p.sweep != nil {
		p.sweep.Stop()
		p.sweep = nil
	}
	p.mu.Unlock()
	for _, c := range conns {
		drop(c.dc, c.release)
	}
}

// drop closes a dedicated connection and lets rueidis forget it: a closed
// connection is not pooled, and nothing is sent on it.
func drop(dc rd.DedicatedClient, release func()) {
	dc.Close()
	release()
}

// Close closes the dedicated connections the Store keeps for Watch (those
// in use are closed as their transactions end). Call it before closing the
// rueidis client, which does not know of them; a Store used after Close
// still works, without keeping any.
func (s *Store) Close() {
	s.idle.close()
	if s.nodes != nil {
		s.nodes.close()
	}
}

// unwatchTimeout bounds an UNWATCH sent after the caller has gone (its
// context done), in the background. A connection that does not answer in
// time is closed instead of going back to the pool.
const unwatchTimeout = 2 * time.Second

// errTxDone is returned for a command sent through a Tx after its Watch
// has returned (nothing is sent: the connection may be another Watch's).
var errTxDone = errors.New("rueidis: Tx used after its Watch returned")

// Watch implements store.Watcher on a dedicated rueidis connection. On
// every way out of Watch — fn's error, a panic in fn, a failed WATCH, a
// lost connection, the context — the connection is kept for the next
// Watch un-watched, or is closed when that cannot be ensured, so the next
// user of the connection never inherits a WATCH.
//
// Watch returns when ctx is done even if rueidis is still making the
// dedicated connection (a single-server client dials it without the
// caller's context); the connection is then released in the background.
func (s *Store) Watch(ctx context.Context, keys []string, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("rueidis: %w", err)
	}
	if len(keys) == 0 {
		return errors.New("rueidis: Watch needs at least one key")
	}
	if ctx.Done() == nil {
		t, release, err := s.watch(ctx, keys)
		if err != nil {
			return err
		}
		return t.run(ctx, release, fn)
	}
	type watched struct {
		t       *tx
		release func()
		err     error
	}
	ch := make(chan watched, 1)
	go func() {
		t, release, err := s.watch(ctx, keys)
		ch <- watched{t, release, err}
	}()
	select {
	case w := <-ch:
		if w.err != nil {
			return w.err
		}
		return w.t.run(ctx, w.release, fn)
	case <-ctx.Done():
		go func() {
			if w := <-ch; w.err == nil {
				w.t.finish(ctx, w.release)
			}
		}()
		// The WATCH may have been written: like any call given up on, the
		// outcome is unknown (WATCH itself changes no data).
		return fmt.Errorf("rueidis: WATCH: %w: %w", store.ErrUnknownOutcome, ctx.Err())
	}
}

// watch pins a dedicated connection and WATCHes keys on it: a single
// server's, or on a Cluster the connection of the node that owns the
// keys' slot (see the notes above).
func (s *Store) watch(ctx context.Context, keys []string) (*tx, func(), error) {
	if s.nodes == nil {
		t, release, _, _, err := s.watchOn(ctx, keys, &s.idle, false, false)
		return t, release, err
	}
	kc := s.c.B().Arbitrary("EXISTS").Keys(keys[0]).Build() // (only its slot is used)
	slot := kc.Slot()
	var (
		tried []string // nodes tried for a slot not learned yet
		moved string   // the node the last MOVED (or ASK) named
		ask   bool     // the last refusal was an ASK
		err   error
	)
	for redirects, tries := 0, 0; redirects < maxRedirects; redirects++ {
		var p *idleConns
		guess := false
		switch {
		case moved != "":
			// (after an ASK, the target of a slot in migration whose
			// source no longer holds the keys: it takes them after
			// ASKING)
			if p = s.nodes.pool(moved); p == nil {
				// A node rueidis does not know yet (it joined after rueidis
				// read the slots): a read of the key through the Cluster
				// client makes rueidis follow the MOVED (or ASK) to it,
				// and so know it, whose slot map would otherwise still
				// name the old node until its next refresh.
				s.c.Do(ctx, s.c.B().Exists().Key(keys[0]).Build())
				p = s.nodes.pool(moved)
			}
			// A node rueidis follows a MOVED to but does not list (a
			// master demoted to a replica and promoted again by a
			// failover: rueidis dropped it, and keeps the connection of a
			// redirection hidden) is listed at its next refresh, which a
			// MOVED starts within a second: until then the Cluster
			// client's own connection would follow the old slot map to
			// the node that refused, every redirect.
			for waits := 1; p == nil && !ask && waits <= unknownNodeWaits && store.TryAgainPause(ctx, waits); waits++ {
				p = s.nodes.pool(moved)
			}
			if p == nil && ask {
				// (the Cluster client's own connection, the fallback
				// below, would follow its slot map to the source)
				return nil, nil, err
			}
		default:
			if p = s.nodes.owner(slot); p == nil {
				p, guess = s.nodes.guess(tried), true
			}
		}
		var t *tx
		var release func()
		asking := ask
		t, release, moved, ask, err = s.watchOn(ctx, keys, p, true, asking)
		switch {
		case err == nil:
			if p != nil && !asking {
				s.nodes.learn(slot, p)
			}
			return t, release, nil
		case moved != "":
			// (an ASK is followed but not learned: the slot is the
			// source's until its migration ends)
			if !ask {
				s.nodes.forgetOwner(slot)
			}
			continue
		case errors.Is(err, store.ErrTryAgain):
			// the watched keys are split by a slot's migration: the
			// WATCH ran nothing; sent again to the node, which owns the
			// slot till the migration ends, after a pause
			if p != nil && !asking {
				s.nodes.learn(slot, p)
			}
			// (with the redirections of a new Watch: a fresh
			// subject's keys, none in a slot in migration, are refused
			// with ASK by the source and with TRYAGAIN by the target
			// until the migration ends; the pauses bound it)
			if tries++; store.TryAgainPause(ctx, tries) {
				redirects = -1
				continue
			}
			return nil, nil, err
		case p != nil && !isRedisErr(err) && ctx.Err() == nil:
			// the node did not answer (twice: see watchOn): its client may
			// be one rueidis has replaced; and it may not own the slot any
			// more (a failover)
			s.nodes.forget(p)
			if guess {
				tried = append(tried, p.addr)
				continue
			}
		}
		return nil, nil, err
	}
	return nil, nil, err
}

// maxRedirects bounds the nodes a Cluster Watch tries for its keys: a
// WATCH refused with MOVED, or a node tried for a slot not learned yet
// that did not answer.
const maxRedirects = 5

// unknownNodeWaits bounds the pauses (store.TryAgainPause: about 2 s in
// all) a Cluster Watch makes for rueidis to list the node a MOVED names.
const unknownNodeWaits = 25

// watchOn pins a connection from p (nil: a dedicated connection of the
// Cluster client, closed when done) and WATCHes keys on it. A pooled
// connection the server has closed (a restart, a failover, an idle
// timeout) fails its first round trip; WATCH changes nothing, so it is
// tried once more on a new one. A WATCH refused with MOVED or ASK returns
// the node it names (ask: it was an ASK), and an error. asking sends
// ASKING before the WATCH and before every later command and transaction
// on the connection (the target of a slot in migration). On error the connection is kept again or
// is being closed.
func (s *Store) watchOn(ctx context.Context, keys []string, p *idleConns, cluster, asking bool) (*tx, func(), string, bool, error) {
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		// (a connection that failed may have been a kept one the server
		// closed: the second attempt is on a new one)
		var dc rd.DedicatedClient
		var release func()
		if p != nil {
			dc, release = p.conn(attempt > 0)
		} else {
			dc, release = s.c.Dedicate()
		}
		t := &tx{dc: dc, s: s, kept: p, cluster: cluster, asking: asking}
		if err := ctx.Err(); err != nil {
			// the caller is gone while the connection was made: nothing sent
			t.finish(ctx, release)
			return nil, nil, "", false, fmt.Errorf("rueidis: WATCH: %w", err)
		}
		w := s.c.B().Arbitrary("WATCH").Keys(keys[0])
		for _, k := range keys[1:] {
			w = w.Args(k)
		}
		wc := w.Build()
		t.slot = wc.Slot()
		t.watched = true // from here on, as far as we know
		var r rd.RedisResult
		switch {
		case cluster:
			// READWRITE first: a replica's connection of a client that
			// reads from replicas (SendToReplicas, ReplicaOnly) is
			// READONLY, and a READONLY replica takes a WATCH and the
			// reads of its master's keys, then refuses the EXEC with
			// MOVED: without it, a Watch that guessed the replica
			// would learn it as the slot's node. (Its own reply is not
			// looked at: an ACL may refuse it, on a connection that is
			// not READONLY anyway.)
			cmds := []rd.Completed{dc.B().Readwrite().Build()}
			if asking {
				cmds = append(cmds, dc.B().Asking().Build())
			}
			rs := dc.DoMulti(ctx, append(cmds, wc)...)
			r = rs[len(rs)-1]
		default:
			r = dc.Do(ctx, wc)
		}
		if err = r.NonRedisError(); err == nil {
			if err = r.Error(); err == nil {
				return t, release, "", false, nil
			}
			err = fmt.Errorf("rueidis: WATCH: %w", err) // the server's refusal
			if re, ok := rd.IsRedisErr(r.Error()); ok && cluster {
				addr, moved := re.IsMoved()
				askAddr, ask := re.IsAsk()
				if ask {
					addr = askAddr
				}
				if moved || ask || re.IsTryAgain() {
					// refused before it ran: nothing is watched, and the
					// connection is as good as before (MOVED and ASK
					// name the node to send it to; TRYAGAIN, keys a
					// slot's migration has split, is store.ErrTryAgain)
					t.watched = false
					t.finish(ctx, release)
					if re.IsTryAgain() {
						err = fmt.Errorf("rueidis: WATCH: %w: %w", store.ErrTryAgain, re)
					}
					return nil, nil, addr, ask, err
				}
			}
			t.sawError(r.Error())
			t.finish(ctx, release)
			return nil, nil, "", false, err
		}
		t.broken = true
		if notSent(err) {
			err = fmt.Errorf("rueidis: WATCH: %w", err)
		} else {
			err = fmt.Errorf("rueidis: WATCH: %w: %w", store.ErrUnknownOutcome, err)
		}
		t.finish(ctx, release)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, nil, "", false, err
}

// isRedisErr reports whether err holds the server's error reply.
func isRedisErr(err error) bool {
	var re *rd.RedisError
	return errors.As(err, &re)
}

// run calls fn with the watched connection and always leaves the
// connection un-watched (or closed) and released, even when fn panics.
func (t *tx) run(ctx context.Context, release func(), fn func(store.Tx) error) error {
	defer t.finish(ctx, release)
	return fn(t)
}

// tx is the connection pinned by Watch.
type tx struct {
	dc rd.DedicatedClient
	// watched: the connection may hold a WATCH (cleared by EXEC, which
	// always un-watches, whatever its outcome).
	watched bool
	// broken: a round trip failed, so the connection's state is unknown.
	broken bool
	// cluster: the connection is a Cluster node's; commands with keys in
	// another slot than the watched keys' are refused.
	cluster bool
	slot    uint16
	// asking: the connection is a migrating slot's target, which takes
	// each command, or each transaction, after ASKING.
	asking bool
	// kept is where a healthy connection is kept for the next Watch when
	// done; nil: it is closed (a Cluster client's own dedicated connection).
	kept *idleConns
	// s is the Store, whose client builds the commands.
	s *Store
	// done: Watch has finished with the connection (which may serve
	// another Watch now): the Tx refuses to send.
	done atomic.Bool
	// errored: the server answered an error (READONLY after a failover,
	// NOPERM, ...): the connection is not kept for the next Watch.
	errored bool
}

// sawError notes a reply that is the server's error (READONLY after a
// failover, NOPERM, BUSY, ...): the connection is closed when done rather
// than kept, in case the error says something of it. A nil reply (GET of
// no key, an aborted EXEC) is no error.
func (t *tx) sawError(err error) {
	if !rd.IsRedisNil(err) {
		t.errored = true
	}
}

// sawErrors applies sawError to every result of a round trip.
func (t *tx) sawErrors(rs []rd.RedisResult) {
	for _, r := range rs {
		if err := r.Error(); err != nil {
			t.sawError(err)
		}
	}
}

var _ store.Tx = (*tx)(nil)

// finish leaves the connection un-watched and releases it: UNWATCH when
// a WATCH may be in force, or Close when the connection cannot be trusted
// any more. It never keeps a caller past its context: when the context is
// done, or a connection must be closed (rueidis's Close waits up to a
// second for a silent server), the rest happens in the background.
func (t *tx) finish(ctx context.Context, release func()) {
	t.done.Store(true)
	// handBack: a healthy, un-watched connection, kept for the next Watch
	// (never handed back to rueidis: see the notes above). Closing runs in
	// the background (rueidis's Close waits for its own timeouts when the
	// connection was cut), so a decision that is complete returns at once.
	handBack := func() {
		if t.kept != nil && !t.errored {
			t.kept.park(t.dc, release)
			return
		}
		go drop(t.dc, release)
	}
	switch {
	case t.broken:
	case !t.watched:
		handBack()
		return
	case ctx.Err() == nil:
		if t.unwatch(ctx) {
			handBack()
			return
		}
	default:
		go func() {
			if t.unwatch(context.Background()) {
				handBack()
				return
			}
			drop(t.dc, release)
		}()
		return
	}
	go drop(t.dc, release) // a closed connection is dropped, not pooled
}

// unwatch sends UNWATCH and reports whether the server answered it.
func (t *tx) unwatch(ctx context.Context) bool {
	uctx, cancel := context.WithTimeout(ctx, unwatchTimeout)
	defer cancel()
	r := t.dc.Do(uctx, t.dc.B().Unwatch().Build())
	if err := r.Error(); err != nil {
		t.sawError(err)
		t.broken = true
		return false
	}
	t.watched = false
	return !t.broken
}

// Do runs cmds outside MULTI on the pinned connection, in one round trip.
func (t *tx) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if len(cmds) == 0 {
		return []store.Reply{}, nil
	}
	built, err := t.build(ctx, cmds, false)
	if err != nil {
		return nil, err
	}
	for _, c := range cmds {
		if strings.EqualFold(c.Name, "WATCH") {
			t.watched = true
		}
	}
	rs := t.dc.DoMulti(ctx, built...)
	t.sawErrors(rs)
	for _, r := range rs {
		if r.NonRedisError() != nil {
			t.broken = true
			break
		}
	}
	if t.asking { // (each command's reply follows its ASKING's)
		for i := range cmds {
			rs[i] = rs[2*i+1]
		}
		rs = rs[:len(cmds)]
	}
	for _, r := range rs {
		if re := redirection(r.Error()); re != nil {
			// the keys' slot moved since the WATCH (a failover, a
			// migration): they are to be watched again where they are
			return nil, fmt.Errorf("rueidis: %w: %w", store.ErrTxAborted, re)
		}
	}
	return collect(rs)
}

// Exec runs cmds inside MULTI/EXEC on the pinned connection, in one round
// trip. A nil EXEC reply (a watched key changed) is store.ErrTxAborted.
func (t *tx) Exec(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	built, err := t.build(ctx, cmds, true)
	if err != nil {
		return nil, err
	}
	rs := t.dc.DoMulti(ctx, built...)
	t.sawErrors(rs)
	for _, r := range rs {
		if err := r.NonRedisError(); err != nil {
			t.broken = true
			return nil, roundTripErr(err)
		}
	}
	if t.asking {
		rs = rs[1:] // ASKING's
	}
	if err := rs[0].Error(); err != nil {
		// MULTI refused (an ACL without it): the commands ran one by one,
		// outside any transaction, and EXEC ("without MULTI") did not
		// un-watch the connection, which must not go back to the pool.
		t.broken = true
		return nil, fmt.Errorf("rueidis: MULTI: %w: %w", store.ErrUnknownOutcome, err)
	}
	t.watched = false // EXEC got its reply: the connection is un-watched
	execR := rs[len(rs)-1]
	m, err := execR.ToMessage()
	switch {
	case rd.IsRedisNil(err):
		return nil, fmt.Errorf("rueidis: %w", store.ErrTxAborted)
	case err != nil:
		if re := movedAway(err, rs[1:len(rs)-1]); re != nil {
			// the keys' slot moved, or is being migrated, since the
			// WATCH: nothing ran, and the keys are to be watched again
			// where they are now
			return nil, fmt.Errorf("rueidis: %w: %w", store.ErrTxAborted, re)
		}
		// EXECABORT: a command was refused while queued; name it.
		for i, r := range rs[1 : len(rs)-1] {
			if qerr := r.Error(); qerr != nil {
				return nil, fmt.Errorf("rueidis: %w (command %d, %s: %v)", err, i, cmds[i].Name, qerr)
			}
		}
		return nil, fmt.Errorf("rueidis: %w", err)
	}
	es, err := m.ToArray()
	if err != nil || len(es) != len(cmds) {
		return nil, fmt.Errorf("rueidis: EXEC returned %d replies for %d commands (%v)", len(es), len(cmds), err)
	}
	out := make([]store.Reply, len(es))
	for i := range es {
		if err := es[i].Error(); err != nil {
			out[i].Err = replyErr(err)
			continue
		}
		out[i].Val, out[i].Err = topValue(&es[i])
	}
	return out, nil
}

// movedAway returns the refusal (MOVED, ASK, or TRYAGAIN: keys a slot's
// migration split) for which a Cluster node did not run a transaction: EXEC's own, or, when EXEC's is EXECABORT,
// that of every command it refused to queue; nil for any other failure.
func movedAway(execErr error, queued []rd.RedisResult) *rd.RedisError {
	if re := redirection(execErr); re != nil {
		return re
	}
	var first *rd.RedisError
	for _, r := range queued {
		if err := r.Error(); err != nil {
			re := redirection(err)
			if re == nil {
				return nil
			}
			if first == nil {
				first = re
			}
		}
	}
	return first
}

// redirection returns err when it is a Cluster node's refusal of a command
// on a slot it does not serve (MOVED, ASK, or TRYAGAIN: keys a slot's
// migration split), else nil.
func redirection(err error) *rd.RedisError {
	re, ok := rd.IsRedisErr(err)
	if !ok {
		return nil
	}
	_, moved := re.IsMoved()
	_, ask := re.IsAsk()
	if !moved && !ask && !re.IsTryAgain() {
		return nil
	}
	return re
}

// build checks and builds cmds for the pinned connection, wrapped in
// MULTI/EXEC when multi is set.
func (t *tx) build(ctx context.Context, cmds []store.Cmd, multi bool) ([]rd.Completed, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("rueidis: %w", err) // nothing sent
	}
	if t.done.Load() {
		return nil, errTxDone
	}
	if err := store.CheckTxCommands(cmds, multi); err != nil {
		return nil, fmt.Errorf("rueidis: %w", err) // nothing sent
	}
	n := len(cmds)
	if multi {
		n += 2
	}
	if t.asking {
		n += len(cmds)
	}
	built := make([]rd.Completed, 0, n)
	if multi {
		if t.asking {
			// (the server keeps ASKING's leave for what MULTI queues)
			built = append(built, t.dc.B().Asking().Build())
		}
		built = append(built, t.dc.B().Multi().Build())
	}
	for _, c := range cmds {
		if err := checkCmd(c); err != nil {
			return nil, err
		}
		b, hasKey := build(t.s.c.B(), c) // (a Cluster's computes the slot)
		if t.cluster && hasKey && b.Slot() != t.slot {
			return nil, fmt.Errorf("rueidis: %s: its key is not in the watched keys' Cluster slot", c.Name)
		}
		if t.asking && !multi {
			built = append(built, t.dc.B().Asking().Build())
		}
		built = append(built, b)
	}
	if multi {
		built = append(built, t.dc.B().Exec().Build())
	}
	return built, nil
}

// clusterConns is a Cluster client's Store's dedicated connections, kept
// per node (see the notes above), and the node it learned owns each slot.
// A node is named by its address as rueidis and MOVED name it.
type clusterConns struct {
	c      rd.Client
	max    int // the most kept per node
	mu     sync.RWMutex
	nodes  map[string]*idleConns
	owners map[uint16]*idleConns
	closed bool
}

func newClusterConns(c rd.Client, max int) *clusterConns {
	return &clusterConns{c: c, max: max, nodes: map[string]*idleConns{}, owners: map[uint16]*idleConns{}}
}

// pool returns the connections of the node at addr, or nil when the
// client does not know of such a node.
func (cc *clusterConns) pool(addr string) *idleConns {
	cc.mu.RLock()
	p := cc.nodes[addr]
	cc.mu.RUnlock()
	if p != nil {
		return p
	}
	n, ok := cc.c.Nodes()[addr]
	if !ok {
		return nil
	}
	return cc.add(addr, n)
}

// add returns the pool of the node at addr, made with n when there is
// none.
func (cc *clusterConns) add(addr string, n rd.Client) *idleConns {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	p := cc.nodes[addr]
	if p == nil {
		p = &idleConns{max: cc.max, addr: addr, dedicate: n.Dedicate, closed: cc.closed}
		cc.nodes[addr] = p
	}
	return p
}

// owner returns the pool of the node learned to own slot, or nil.
func (cc *clusterConns) owner(slot uint16) *idleConns {
	cc.mu.RLock()
	defer cc.mu.RUnlock()
	return cc.owners[slot]
}

// guess returns the pool of a node whose address is not in tried, for a
// slot whose owner is not known (the node answers MOVED if it is not the
// owner), or nil when there is none left.
func (cc *clusterConns) guess(tried []string) *idleConns {
	nodes := cc.c.Nodes()
	addrs := make([]string, 0, len(nodes))
	for addr := range nodes {
		if !slices.Contains(tried, addr) {
			addrs = append(addrs, addr)
		}
	}
	if len(addrs) == 0 {
		return nil
	}
	addr := addrs[rand.IntN(len(addrs))]
	return cc.add(addr, nodes[addr])
}

// learn notes that the node of p owns slot (unless p was forgotten
// meanwhile).
func (cc *clusterConns) learn(slot uint16, p *idleConns) {
	cc.mu.RLock()
	known := cc.owners[slot] == p
	cc.mu.RUnlock()
	if !known {
		cc.mu.Lock()
		if cc.nodes[p.addr] == p {
			cc.owners[slot] = p
		}
		cc.mu.Unlock()
	}
}

// forgetOwner forgets which node owns slot.
func (cc *clusterConns) forgetOwner(slot uint16) {
	cc.mu.Lock()
	delete(cc.owners, slot)
	cc.mu.Unlock()
}

// forget forgets the node of p (a node that did not answer: the next
// Watch on it takes a new client of it from rueidis, and learns again
// which slots it owns) and closes the connections kept for it.
func (cc *clusterConns) forget(p *idleConns) {
	cc.mu.Lock()
	for addr, q := range cc.nodes {
		if q == p {
			delete(cc.nodes, addr)
		}
	}
	for slot, q := range cc.owners {
		if q == p {
			delete(cc.owners, slot)
		}
	}
	cc.mu.Unlock()
	p.close()
}

// close closes every node's kept connections; later ones are closed as
// they come.
func (cc *clusterConns) close() {
	cc.mu.Lock()
	cc.closed = true
	nodes := cc.nodes
	cc.nodes = map[string]*idleConns{}
	cc.owners = map[uint16]*idleConns{}
	cc.mu.Unlock()
	for _, p := range nodes {
		p.close()
	}
}
