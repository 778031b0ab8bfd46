package conformance

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// expireDeletesLua is put before every script that an expiryStore sends.
//
//go:embed lua/expire_deletes.lua
var expireDeletesLua string

// expiryStore runs every script with expireDeletesLua before it: a key a
// script gives an expiry at most 2 ms away is gone at once, for the rest of
// the script, as on a real server whose clock passed that expiry within
// the command. It sends every script as EVAL (its EVALSHA answers
// NOSCRIPT, in a batch too), so that the scripts are the strategies' own,
// unchanged; other commands, and a Watcher's transactions, go to the
// server as they are.
type expiryStore struct{ store.Store }

func (s expiryStore) EvalSha(context.Context, string, []string, []any) (any, error) {
	return nil, store.ErrNoScript
}

func (s expiryStore) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	// (two constant sources, the suite's and the strategy's: no user data)
	return s.Store.Eval(ctx, expireDeletesLua+"\n"+src, keys, args)
}

// expiryBatcher is an expiryStore whose store has a store.Batcher (and
// says whether it is one server, as the store does).
type expiryBatcher struct {
	expiryStore
	b store.Batcher
}

func (s expiryBatcher) Batch(ctx context.Context, cmds []store.Cmd) []store.Reply {
	out := make([]store.Reply, len(cmds))
	var send []store.Cmd
	var at []int
	for i, c := range cmds {
		switch c.Name {
		case "EVALSHA":
			out[i].Err = store.ErrNoScript
			continue
		case "EVAL":
			args := slices.Clone(c.Args)
			args[0] = expireDeletesLua + "\n" + args[0].(string)
			c = store.Cmd{Name: c.Name, Args: args}
		}
		send, at = append(send, c), append(at, i)
	}
	if len(send) > 0 {
		for k, r := range s.b.Batch(ctx, send) {
			out[at[k]] = r
		}
	}
	return out
}

func (s expiryBatcher) OneServer() bool {
	o, ok := s.Store.(store.OneServer)
	return ok && o.OneServer()
}

// newExpiryStore wraps st, keeping its Watcher and its Batcher (not its
// integer-script path: scripts go through EvalSha and Eval).
func newExpiryStore(st store.Store) store.Store {
	w, isW := st.(store.Watcher)
	b, isB := st.(store.Batcher)
	switch {
	case isW && isB:
		return struct {
			expiryBatcher
			store.Watcher
		}{expiryBatcher{expiryStore{st}, b}, w}
	case isW:
		return struct {
			expiryStore
			store.Watcher
		}{expiryStore{st}, w}
	case isB:
		return expiryBatcher{expiryStore{st}, b}
	}
	return expiryStore{st}
}

// Property 45: a script's own expiry may delete its key at once. Redis
// deletes a key at PEXPIRE (EXPIRE, PEXPIREAT, EXPIREAT) when the new
// expiry is already past by its clock, which for an expiry 1 or 2 ms away
// happens when the clock crosses a millisecond within the command, or the
// server's process pauses there (measured on redis-server 7.0: 13 in
// 200 000 scripts that PEXPIRE a key by 1 ms found it gone at their next
// command). A script that touches the key after that finds no key: reads
// come back empty (a sliding log's oldest unit: nil arithmetic, an error
// for the caller), and a write creates a key without a TTL (a take-back's
// DECRBY: a negative counter that never expires, the subject locked out
// by errors for good). Every script is run with such expiries deleting
// their key (expireDeletesLua) on limits of 2 ms: a fresh subject, one
// whose key has lost its TTL with its quota used, one whose limit was
// shortened from a minute (the same key, a TTL beyond the new window),
// each admitted and denied, one by one and in one AllowMany, and peeked. No call may fail, and afterwards (and in the final sweep)
// every key has a TTL and the next calls, on the server as it is, are
// decided without error.
func checkExpireDeletesAtOnce(c *checker) {
	long := limiter.Limit{Name: "p45", Rate: 2, Period: time.Minute}
	short := limiter.Limit{Name: "p45", Rate: 2, Period: 2 * time.Millisecond}
	c.window(long, short)
	lim := c.limiter(newExpiryStore(c.h.Store()))
	plain := c.limiter(nil)
	calls := 0
	// immortal fails for every key without a TTL (a later call may delete
	// it again: the sweep follows each call)
	// ignored: keys this check stripped of their TTL which an
	// epoch-aligned strategy's calls may leave behind: its calls name
	// their window from the app's clock, which runs on (on a busy
	// machine, past a 2 ms window) while a virtual clock does not, and
	// no call touches the key of a window it did not name (property 11
	// checks its repairs)
	ignored := map[string]bool{}
	immortal := func(when string) {
		c.t.Helper()
		for k, p := range c.ttls() {
			if p == -1 && !ignored[k] {
				c.t.Errorf("property 45: %s: %q left without a TTL (a write after the key's own expiry deleted it made it anew)", when, k)
			}
		}
	}
	// decide makes n calls of l for subject: Allow, or with many, one
	// AllowMany of n asks (a strategy's batch or many-request script)
	decide := func(phase, subject string, many bool, n int, l limiter.Limit) {
		c.t.Helper()
		calls += n
		var rs []limiter.Result
		var errs []error
		if many {
			asks := make([]limiter.Ask, n)
			for i := range asks {
				asks[i] = limiter.Ask{Key: subject, Cost: 1, Limits: []limiter.Limit{l}}
			}
			for _, a := range lim.AllowMany(c.ctx, asks) {
				rs, errs = append(rs, a.Result), append(errs, a.Err)
			}
			immortal(phase + ": AllowMany")
		} else {
			for i := range n {
				r, err := lim.Allow(c.ctx, subject, l)
				rs, errs = append(rs, r), append(errs, err)
				immortal(fmt.Sprintf("%s: call %d", phase, i))
			}
		}
		for i, err := range errs {
			if err != nil {
				c.t.Errorf("property 45: %s: call %d of %s with keys deleted at their expiry (AllowMany: %t): %v", phase, i, l, many, err)
			} else if r := rs[i]; r.Remaining < 0 || r.Remaining > l.Rate || r.ResetAfter < 0 {
				c.t.Errorf("property 45: %s: call %d of %s = %+v: Remaining or ResetAfter out of range", phase, i, l, r)
			}
		}
	}
	peek := func(phase, subject string, l limiter.Limit) {
		c.t.Helper()
		calls++
		if _, err := lim.Peek(c.ctx, subject, l); err != nil {
			c.t.Errorf("property 45: %s: Peek of %s with keys deleted at their expiry: %v", phase, l, err)
		}
	}
	after := func(phase, subject string) {
		c.t.Helper()
		immortal(phase)
		// the next calls, on the server as it is
		for i := range 3 {
			if _, err := plain.Allow(c.ctx, subject, short); err != nil {
				c.t.Errorf("property 45: %s: call %d after it, on the server as it is: %v", phase, i, err)
			}
		}
	}
	for _, many := range []bool{false, true} {
		s := "p45"
		if many {
			s = "p45m"
		}
		// a fresh subject: admitted, then denied
		decide("fresh subject", s+"a", many, 4, short)
		peek("fresh subject", s+"a", short)
		after("fresh subject", s+"a")
		// a limit shortened from a minute to 2 ms, its quota used
		decide("before the change", s+"b", false, 3, long)
		peek("limit shortened", s+"b", short)
		decide("limit shortened", s+"b", many, 3, short)
		after("limit shortened", s+"b")
		// a key that lost its TTL (a leak from elsewhere), its quota used
		// (on the server as it is: on a virtual clock its keys stay)
		for range 3 {
			if _, err := plain.Allow(c.ctx, s+"c", short); err != nil {
				c.t.Fatalf("property 45: before the leak: %v", err)
			}
		}
		leaked := c.subjectKeys(s + "c")
		for _, k := range leaked {
			if _, err := c.do(store.Cmd{Name: "PERSIST", Args: []any{k}}); err != nil {
				c.t.Fatalf("PERSIST %s: %v", k, err)
			}
			ignored[k] = c.spec.Aligned
		}
		peek("key without a TTL", s+"c", short)
		decide("key without a TTL", s+"c", many, 3, short)
		for _, k := range leaked {
			if ignored[k] && c.pttl(k) == -1 {
				if _, err := c.do(store.Cmd{Name: "PEXPIRE", Args: []any{k, short.Period.Milliseconds()}}); err != nil {
					c.t.Fatalf("PEXPIRE %s: %v", k, err)
				}
			}
		}
		after("key without a TTL", s+"c")
	}
	if !c.t.Failed() {
		c.t.Logf("property 45: %d calls with expiries of at most 2 ms deleting their keys at once", calls)
	}
}

// Property 46: property 45 for a Leaser's scripts. Leases of 2 ms, on a
// virtual clock (a real one ends them before the calls that matter): two
// held, their set stripped of its TTL (a leak from elsewhere), then
// acquires through scripts whose expiries of at most 2 ms delete their key
// at once: the refusal that gives the set its expiry back and tells when a
// slot frees must not fail, no key may be left without a TTL, and the next
// acquires on the server as it is are decided without error.
func checkLeaseExpireDeletesAtOnce(c *checker) {
	if !c.h.Caps().VirtualClock {
		c.t.Skip("property 46: needs a virtual clock, which keeps leases of 2 ms while the check runs")
	}
	f := limiter.InFlight{Max: 2, TTL: 2 * time.Millisecond}
	plain := c.concurrency(f)
	wrapped, err := limiter.NewConcurrency(newExpiryStore(c.h.Store()), c.spec.Leaser, limiter.WithPrefix(c.prefix))
	if err != nil {
		c.t.Fatalf("limiter.NewConcurrency: %v", err)
	}
	for i := range 2 {
		if l, err := plain.Acquire(c.ctx, "p46", f); err != nil || !l.Held {
			c.t.Fatalf("property 46: lease %d = %s, %v; want held", i, leaseString(l), err)
		}
	}
	for _, k := range c.keys() {
		if _, err := c.do(store.Cmd{Name: "PERSIST", Args: []any{k}}); err != nil {
			c.t.Fatalf("PERSIST %s: %v", k, err)
		}
	}
	for i := range 3 {
		l, err := wrapped.Acquire(c.ctx, "p46", f)
		if err != nil {
			c.t.Errorf("property 46: acquire %d of a full set without a TTL, with keys deleted at their expiry: %v", i, err)
		} else if l.Held && l.InFlight > f.Max {
			c.t.Errorf("property 46: acquire %d = %s: more than %d in flight", i, leaseString(l), f.Max)
		}
		for k, p := range c.ttls() {
			if p == -1 {
				c.t.Errorf("property 46: acquire %d left %q without a TTL", i, k)
			}
		}
	}
	for i := range 3 {
		if _, err := plain.Acquire(c.ctx, "p46", f); err != nil {
			c.t.Errorf("property 46: acquire %d after it, on the server as it is: %v", i, err)
		}
	}
}
