package redigo

import (
	"context"
	"fmt"
	"strings"

	"github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"

	"github.com/quotagate/limiter/store"
)

// Watch implements store.Watcher: it takes one connection from the pool (on
// a Cluster, bound to the node of keys[0]), WATCHes keys on it and calls fn
// with it. Whatever fn returns is returned. On every way out, panics
// included, the connection is un-watched (UNWATCH, unless an EXEC already
// did it) before it goes back to the pool; one that failed, or whose UNWATCH
// cannot be sent before ctx ends, is discarded instead.
func (s *Store) Watch(ctx context.Context, keys []string, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return fail(ctx, err, false)
	}
	c, asking, err := s.watch(ctx, keys)
	if err != nil {
		return err
	}
	t := &txn{c: c, watching: len(keys) > 0, asking: asking, slot: -1}
	if len(keys) > 0 {
		t.slot = redisc.Slot(keys[0])
	}
	defer t.release(ctx)
	return fn(t)
}

// watch returns a connection with keys watched on it. On a Cluster whose
// slot of keys is being migrated, a WATCH the source refused with ASK (a
// key it no longer holds) is sent to the target after ASKING, on a
// connection dialled to it: asking reports that, and that every later
// command on the connection needs ASKING too.
func (s *Store) watch(ctx context.Context, keys []string) (c redis.Conn, asking bool, err error) {
	key := ""
	if len(keys) > 0 {
		key = keys[0]
	}
	args := make([]any, len(keys))
	for i, k := range keys {
		args[i] = k
	}
	var h hop
	for redirects, tries := 0, 0; ; {
		c, err := s.conn(ctx, key, h)
		if err != nil || len(keys) == 0 {
			if err != nil {
				return nil, false, fail(ctx, err, false)
			}
			return c, false, nil
		}
		var v any
		if v, err = pipe(ctx, c, []store.Cmd{{Name: "WATCH", Args: args}}, h.asking); err == nil {
			v = v.([]any)[0]
			if re, ok := v.(redis.Error); ok {
				err = re
			}
		}
		if err == nil {
			return c, h.asking, nil
		}
		_ = c.Close()
		re, ok := err.(redis.Error)
		if !ok {
			// Written, reply lost: as for any command (WATCH changes no
			// data, but the contract is mechanical, and safe).
			return nil, false, fail(ctx, err, true)
		}
		switch kind, _ := refusal(re); kind {
		case "MOVED", "ASK":
			// (refused: nothing is watched)
			if next, again := s.redirect(redirects, h, re); again {
				h = next
				redirects++
				continue
			}
		case "TRYAGAIN":
			// the watched keys are split by a slot's migration: WATCH
			// ran nothing
			// (sent to the slot's owner again, with the redirections
			// of a new call: a fresh subject's keys, none in a slot in
			// migration, are refused with ASK by the source and with
			// TRYAGAIN by the target until the migration ends; the
			// pauses bound it)
			if tries++; store.TryAgainPause(ctx, tries) {
				h, redirects = hop{}, 0
				continue
			}
		}
		return nil, false, replyErr(re)
	}
}

// movedAway reports refusals that are all MOVED, ASK or TRYAGAIN (keys a
// slot's migration split), at least one: a slot moved or moving.
func movedAway(refusals []any) bool {
	for _, v := range refusals {
		if kind, _ := refusal(v); kind == "" {
			return false
		}
	}
	return len(refusals) > 0
}

// otherSlotRefused reports a transaction in which a command on a key of
// another slot than the watched keys' was refused while queued (raw[1+i]
// is cmds[i]'s reply): an error of the call, not a moved slot, which
// watching again would not change.
func (t *txn) otherSlotRefused(cmds []store.Cmd, raw []any) bool {
	for i, c := range cmds {
		if _, ok := raw[1+i].(redis.Error); !ok {
			continue
		}
		if k := c.Key(); k != "" && redisc.Slot(k) != t.slot {
			return true
		}
	}
	return false
}

// txn is a connection pinned by Watch.
type txn struct {
	c redis.Conn
	// watching: keys are watched on c (no EXEC has run since WATCH).
	watching bool
	// asking: c is a migrating slot's target, which takes its commands
	// after ASKING (see Store.watch).
	asking bool
	// slot is the watched keys' Cluster slot (-1 without keys).
	slot int
}

// release un-watches the connection and gives it back to the pool. A
// connection with an error, or whose UNWATCH fails, has an error set, and
// the pool discards it rather than keeping it idle.
func (t *txn) release(ctx context.Context) {
	if t.watching && t.c.Err() == nil {
		if _, err := do1(ctx, t.c, "UNWATCH", nil); err == nil {
			t.watching = false
		}
	}
	_ = t.c.Close()
}

// usable fails when the pinned connection can no longer be used; nothing
// is written then.
func (t *txn) usable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fail(ctx, err, false)
	}
	if err := t.c.Err(); err != nil {
		return fail(ctx, err, false)
	}
	return nil
}

// Do runs cmds on the pinned connection outside MULTI, in one round trip.
func (t *txn) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if len(cmds) == 0 {
		return nil, nil
	}
	if err := t.usable(ctx); err != nil {
		return nil, err
	}
	if err := store.CheckTxCommands(cmds, false); err != nil {
		return nil, fmt.Errorf("redigo: %w", err) // nothing sent
	}
	for _, c := range cmds {
		if strings.EqualFold(c.Name, "WATCH") {
			t.watching = true // fn watches more keys: un-watch them on release
		}
	}
	raw, err := pipe(ctx, t.c, cmds, t.asking)
	if err != nil {
		return nil, fail(ctx, err, true)
	}
	for i, v := range raw {
		if kind, _ := refusal(v); kind == "" {
			continue
		}
		if k := cmds[i].Key(); k != "" && redisc.Slot(k) == t.slot {
			// the watched keys' slot moved since the WATCH (a failover,
			// a migration): they are to be watched again where they
			// are (a command on another slot's key keeps its refusal
			// as its reply: watching again would not change it)
			return nil, fmt.Errorf("redigo: %w: %v", store.ErrTxAborted, v)
		}
	}
	return replies(raw), nil
}

// Exec runs cmds inside MULTI/EXEC on the pinned connection, in one round
// trip. A nil EXEC reply (a watched key changed) is store.ErrTxAborted. A
// transaction the server refused (EXECABORT, a command that could not be
// queued) ran nothing: every Reply carries an error.
func (t *txn) Exec(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if err := t.usable(ctx); err != nil {
		return nil, err
	}
	if err := store.CheckTxCommands(cmds, true); err != nil {
		return nil, fmt.Errorf("redigo: %w", err) // nothing sent
	}
	all := make([]store.Cmd, 0, len(cmds)+2)
	all = append(all, store.Cmd{Name: "MULTI"})
	all = append(all, cmds...)
	all = append(all, store.Cmd{Name: "EXEC"})
	raw, err := pipe(ctx, t.c, all, t.asking)
	if err != nil {
		return nil, fail(ctx, err, true)
	}
	if re, ok := raw[0].(redis.Error); ok {
		// MULTI refused (an ACL without it): the commands ran one by one,
		// outside any transaction
		return nil, fmt.Errorf("redigo: MULTI: %w: %w", store.ErrUnknownOutcome, re)
	}
	t.watching = false // EXEC un-watches, whatever its outcome
	out := make([]store.Reply, len(cmds))
	switch x := raw[len(raw)-1].(type) {
	case nil:
		return nil, fmt.Errorf("redigo: %w", store.ErrTxAborted)
	case []any:
		if len(x) != len(cmds) {
			return nil, fmt.Errorf("redigo: EXEC returned %d replies for %d commands", len(x), len(cmds))
		}
		for i, v := range x {
			out[i] = toReply(v)
		}
	case redis.Error:
		if rs := txRefusals(raw); movedAway(rs) && !t.otherSlotRefused(cmds, raw) {
			// the keys' slot moved, or is being migrated, since the
			// WATCH: nothing ran, and the keys are to be watched again
			// where they are now
			return nil, fmt.Errorf("redigo: %w: %v", store.ErrTxAborted, rs[0])
		}
		for i := range cmds {
			if qe, ok := raw[1+i].(redis.Error); ok {
				out[i].Err = replyErr(qe)
			} else {
				out[i].Err = replyErr(x)
			}
		}
	default:
		return nil, fmt.Errorf("redigo: EXEC returned a %T", x)
	}
	return out, nil
}
