package rueidis

import (
	"context"
	"errors"
	"fmt"
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
// scheduled, so no check of the server before it closes that window. So a
// Store of a client that is not a Cluster client never hands a live
// dedicated connection back: Watch keeps them itself for the next Watch
// (which also spares the server those commands at each transaction), up
// to maxIdle, and closes the others (a closed connection is dropped by
// rueidis, sending nothing). A Cluster client's dedicated connection is
// pinned to one slot and cannot serve the next Watch's keys: it is handed
// back, and the race stays open there (in the instant a script begins to
// hold a node); once a node has answered BUSY, Watch closes its dedicated
// connections instead, for 10 s after the last BUSY it saw. Calls during
// BUSY fail with the server's error, which names BUSY.

// maxIdle is the most dedicated connections a Store keeps for the next
// Watch by default (WithWatchConns): as many as rueidis's pool would keep,
// its default BlockingPoolSize. A Store keeps no more than were in use at
// once. idleFor is how long one is kept unused; one idle longer is closed
// when the next Watch or hand-back meets it.
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
	max     int // the most kept
	mu      sync.Mutex
	conns   []idleConn // the most recently parked last
	waiters []waiter   // Watches waiting, the longest waiting first
	dialing int        // connections being made by rueidis
	closed  bool
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
		if !fresh && now.Sub(c.at) < idleFor {
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
	for len(p.conns) > 0 && now.Sub(p.conns[0].at) >= idleFor {
		go drop(p.conns[0].dc, p.conns[0].release)
		p.conns = p.conns[1:]
	}
	if !p.closed && len(p.conns) < p.max && len(p.waiters) == 0 {
		p.conns = append(p.conns, idleConn{dc, release, now})
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	go drop(dc, release)
}

// conn returns a dedicated connection for a Watch. A Cluster client's
// comes from rueidis (it is pinned to the slot of its first command); a
// single server's is one the Store kept (unless fresh), or the first one
// made or handed back after (see idleConns). A Watch asking rueidis
// directly could wait behind the Store's own requests for a slot of a
// full pool, whose connections, made for Watches served meanwhile, the
// Store would keep.
func (s *Store) conn(cluster, fresh bool) (rd.DedicatedClient, func()) {
	if cluster || s.idle.max == 0 {
		return s.c.Dedicate()
	}
	c, ch, dial := s.idle.get(fresh)
	if ch == nil {
		return c.dc, c.release
	}
	if dial {
		go func() {
			dc, release := s.c.Dedicate()
			s.idle.made(dc, release)
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
}

// unwatchTimeout bounds an UNWATCH sent after the caller has gone (its
// context done), in the background. A connection that does not answer in
// time is closed instead of going back to the pool.
const unwatchTimeout = 2 * time.Second

// busyHold is how long after a BUSY reply Watch keeps closing a Cluster
// client's dedicated connections instead of handing them back to rueidis.
const busyHold = 10 * time.Second

// errTxDone is returned for a command sent through a Tx after its Watch
// has returned (nothing is sent: the connection may be another Watch's).
var errTxDone = errors.New("rueidis: Tx used after its Watch returned")

// errTxState is returned for a command that would change the transaction
// state of the pinned connection behind Watch's back.
var errTxState = errors.New("rueidis: MULTI, EXEC and DISCARD are issued by Tx.Exec only")

// Watch implements store.Watcher on a dedicated rueidis connection
// (Client.Dedicate). On every way out of Watch — fn's error, a panic in fn,
// a failed WATCH, a lost connection, the context — the connection is kept
// for the next Watch (a single server's) or goes back to rueidis (a
// Cluster's) un-watched, or is closed when that cannot be ensured, so the
// next user of the connection never inherits a WATCH.
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

// watch pins a dedicated connection and WATCHes keys on it. A pooled
// connection the server has closed (a restart, a failover, an idle
// timeout) fails its first round trip; WATCH changes nothing, so it is
// tried once more on a new connection. On error the connection has been
// handed back or is being closed.
func (s *Store) watch(ctx context.Context, keys []string) (*tx, func(), error) {
	var err error
	cluster := s.c.Mode() == rd.ClientModeCluster
	for attempt := 0; attempt < 2; attempt++ {
		// (a connection that failed may have been a kept one the server
		// closed: the second attempt is on a new one)
		dc, release := s.conn(cluster, attempt > 0)
		if err := ctx.Err(); err != nil {
			// the caller is gone while the connection was made: nothing sent
			t := &tx{dc: dc, s: s, cluster: cluster}
			t.finish(ctx, release)
			return nil, nil, fmt.Errorf("rueidis: WATCH: %w", err)
		}
		t := &tx{dc: dc, s: s, cluster: cluster}
		w := dc.B().Arbitrary("WATCH").Keys(keys[0])
		for _, k := range keys[1:] {
			w = w.Args(k)
		}
		wc := w.Build()
		t.slot = wc.Slot()
		t.watched = true // from here on, as far as we know
		r := dc.Do(ctx, wc)
		if err = r.NonRedisError(); err == nil {
			if err = r.Error(); err == nil {
				return t, release, nil
			}
			t.sawError(err)
			err = fmt.Errorf("rueidis: WATCH: %w", err) // the server's refusal
			t.finish(ctx, release)
			return nil, nil, err
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
	return nil, nil, err
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
	// cluster: the connection is a Cluster node's, pinned to the slot of
	// the watched keys; commands with keys in another slot are refused.
	cluster bool
	slot    uint16
	// s is the Store, told when the server answers BUSY.
	s *Store
	// done: Watch has finished with the connection (which may serve
	// another Watch now): the Tx refuses to send.
	done atomic.Bool
	// errored: the server answered an error (READONLY after a failover,
	// NOPERM, ...): the connection is not kept for the next Watch.
	errored bool
}

// sawError notes a reply that is the server's error. BUSY (another
// client's script holds the server) breaks the connection for rueidis:
// handing a dedicated connection back makes rueidis send UNSUBSCRIBE on
// it, which the server then answers with a BUSY error where rueidis
// expects a push message, and rueidis panics ("protocol bug, message
// handled out of order"), killing the process. So after a BUSY the
// connection is closed, not handed back, and so is every dedicated
// connection of a Cluster client's Store for busyHold (a single server's
// are kept, never handed back).
func (t *tx) sawError(err error) {
	if rd.IsRedisNil(err) {
		return // a nil reply (GET of no key, an aborted EXEC): no error
	}
	t.errored = true
	if re, ok := rd.IsRedisErr(err); ok && (re.Error() == "BUSY" || strings.HasPrefix(re.Error(), "BUSY ")) {
		t.broken = true
		t.s.busyUntil.Store(time.Now().Add(busyHold).UnixNano())
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
	// release itself talks to the server (rueidis resets a dedicated
	// connection before pooling it again) and waits for its own timeouts
	// when the connection was cut: it always runs in the background, so
	// a decision that is complete returns at once.
	// handBack: a healthy, un-watched connection, kept for the next Watch
	// (a client that is not a Cluster client's: see the notes above) or
	// handed back to rueidis
	handBack := func() {
		if !t.cluster && !t.errored {
			t.s.idle.park(t.dc, release)
			return
		}
		if !t.cluster {
			go drop(t.dc, release)
			return
		}
		go release()
	}
	switch {
	case t.broken:
	case t.cluster && time.Now().UnixNano() < t.s.busyUntil.Load():
		// A node said BUSY lately: see sawError. (A single server's
		// connections are kept, never handed back: nothing to fear.)
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

// unwatch sends UNWATCH and reports whether the server answered it. A PING
// goes with it, in the same round trip: UNWATCH (like WATCH) is answered
// even while a script holds the server, PING is not, so a BUSY server is
// noticed before the connection is handed back (see sawError).
func (t *tx) unwatch(ctx context.Context) bool {
	uctx, cancel := context.WithTimeout(ctx, unwatchTimeout)
	defer cancel()
	rs := t.dc.DoMulti(uctx, t.dc.B().Unwatch().Build(), t.dc.B().Ping().Build())
	t.sawErrors(rs)
	if err := rs[0].Error(); err != nil {
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

// build checks and builds cmds for the pinned connection, wrapped in
// MULTI/EXEC when multi is set.
func (t *tx) build(ctx context.Context, cmds []store.Cmd, multi bool) ([]rd.Completed, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("rueidis: %w", err) // nothing sent
	}
	if t.done.Load() {
		return nil, errTxDone
	}
	n := len(cmds)
	if multi {
		n += 2
	}
	built := make([]rd.Completed, 0, n)
	if multi {
		built = append(built, t.dc.B().Multi().Build())
	}
	for _, c := range cmds {
		if err := checkCmd(c); err != nil {
			return nil, err
		}
		switch strings.ToUpper(c.Name) {
		case "MULTI", "EXEC", "DISCARD":
			return nil, errTxState
		}
		b, hasKey := build(t.dc.B(), c)
		if t.cluster && hasKey && b.Slot() != t.slot {
			return nil, fmt.Errorf("rueidis: %s: its key is not in the watched keys' Cluster slot", c.Name)
		}
		built = append(built, b)
	}
	if multi {
		built = append(built, t.dc.B().Exec().Build())
	}
	return built, nil
}
