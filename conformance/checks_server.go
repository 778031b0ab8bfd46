package conformance

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
)

// Property 18: server conditions. On a private redis-server the suite
// started, each of these makes every call an error that names the server's
// refusal, is not an unknown outcome (the server refused before running
// anything), follows the fail mode (FailOpen admits and FailClosed denies,
// both Degraded with the cause), and changes no counter: memory full under
// noeviction (OOM), an ACL that denies the limiter's keys (NOPERM), a
// server that another client's script holds (BUSY), and a connection whose
// password is missing (NOAUTH). Memory full refuses only commands that may
// use memory: a decision that needs none (a live bucket whose state is its
// key's expiry) may instead be made, exactly as without the condition
// (admitted, one unit counted, nothing degraded). Then a promoted replica
// continues the counts with TTLs carried over, its empty script cache
// invisible.
func checkServerConditions(c *checker) {
	h, ok := c.h.(*harness)
	if !ok || h.server == nil {
		c.t.Skip("needs a private redis-server the suite started: the check changes its configuration (maxmemory, ACL, requirepass) and starts a replica of it")
	}
	l := limiter.PerHour(10)
	c.window(l)
	healthy := c.limiter(nil, limiter.WithTimeout(healthyTimeout))
	if r, err := healthy.Allow(c.ctx, "p18", l); err != nil || !r.Allowed {
		c.t.Fatalf("property 18: warm-up: %+v, %v", r, err)
	}
	base := c.counter("p18", l)

	admin := func(args ...any) {
		c.t.Helper()
		r, err := c.do(store.Cmd{Name: args[0].(string), Args: args[1:]})
		if err == nil {
			err = r.Err
		}
		if err != nil {
			c.t.Fatalf("property 18: %v: %v", args, err)
		}
	}
	// decided: the calls a condition let through, each exact
	decided := int64(0)
	refused := func(what, want string, st store.Store) {
		c.t.Helper()
		modes := []limiter.FailMode{limiter.FailError, limiter.FailOpen, limiter.FailClosed}
		for _, m := range modes {
			lim := c.limiter(st, limiter.WithTimeout(healthyTimeout), limiter.WithFailMode(m))
			r, err, _ := c.timedAllow(lim, "p18", l)
			cause := err
			if m != limiter.FailError {
				cause = r.Cause
			}
			if want == "OOM" && err == nil && r.Cause == nil {
				// made without memory: exact, as a healthy server's
				n := c.counter("p18", l)
				if left := l.Rate - base - decided - 1; !r.Allowed || r.Degraded || r.Remaining != left || n != base+decided+1 {
					c.t.Errorf("property 18: %s, fail mode %v: decided %+v, the counter then %d; want admitted with %d remaining, not degraded, the counter %d (or an error naming OOM, the counter %d)", what, m, r, n, left, base+decided+1, base+decided)
				}
				decided = n - base
				continue
			}
			switch {
			case cause == nil || !strings.Contains(cause.Error(), want):
				c.t.Errorf("property 18: %s, fail mode %v: %+v, %v; want an error naming %s", what, m, r, err, want)
			case errors.Is(cause, store.ErrUnknownOutcome):
				c.t.Errorf("property 18: %s, fail mode %v: %v is an unknown outcome, but the server refused before running anything", what, m, cause)
			case m == limiter.FailError && (r.Allowed || r.Degraded):
				c.t.Errorf("property 18: %s: FailError returned %+v with its error", what, r)
			case m == limiter.FailOpen && (err != nil || !r.Allowed || !r.Degraded):
				c.t.Errorf("property 18: %s: FailOpen = %+v, %v; want allowed and degraded", what, r, err)
			case m == limiter.FailClosed && (err != nil || r.Allowed || !r.Degraded):
				c.t.Errorf("property 18: %s: FailClosed = %+v, %v; want denied and degraded", what, r, err)
			}
		}
	}
	unchanged := func(what string) {
		c.t.Helper()
		if n := c.counter("p18", l); n != base+decided {
			c.t.Errorf("property 18: %s: the counter moved from %d to %d; a refused call must change nothing", what, base+decided, n)
		}
	}

	admin("CONFIG", "SET", "maxmemory-policy", "noeviction")
	admin("CONFIG", "SET", "maxmemory", "1")
	refused("memory full", "OOM", nil)
	admin("CONFIG", "SET", "maxmemory", "0")
	unchanged("memory full")

	admin("ACL", "SETUSER", "default", "resetkeys", "~p18-elsewhere:*")
	refused("an ACL denying the keys", "NOPERM", nil)
	admin("ACL", "SETUSER", "default", "allkeys")
	unchanged("an ACL denying the keys")

	if h.server.TLS() == nil { // redistest.Busy speaks plain TCP
		end := redistest.Busy(c.t, h.addr)
		refused("a busy server", "BUSY", nil)
		end()
		unchanged("a busy server")
	}

	admin("CONFIG", "SET", "requirepass", "p18-secret")
	st, closeSt, err := c.h.Dial(c.ctx, h.addr)
	switch {
	case err == nil:
		refused("no password", "NOAUTH", st)
		closeSt()
	case !strings.Contains(err.Error(), "NOAUTH"):
		c.t.Errorf("property 18: no password: the store could not be made (%v), and the error does not name NOAUTH", err)
	}
	admin("CONFIG", "SET", "requirepass", "")
	unchanged("no password")

	if r, err := healthy.Allow(c.ctx, "p18", l); err != nil || !r.Allowed || r.Remaining != l.Rate-base-decided-1 {
		c.t.Fatalf("property 18: after the conditions ended: %+v, %v; want admitted with %d remaining", r, err, l.Rate-base-decided-1)
	}
	if h.server.TLS() == nil {
		c.promotedReplica(h, healthy, l)
	}
}

// promotedReplica starts a replica of the harness's server, makes a
// decision that reaches it, promotes it and decides there: the count
// continues, the keys keep their TTLs, and the replica's empty script cache
// does not show.
func (c *checker) promotedReplica(h *harness, healthy *limiter.Limiter, l limiter.Limit) {
	host, port, _ := net.SplitHostPort(h.addr)
	replica := redistest.StartServer(c.t, "--replicaof", host, port)
	rst, closeR, err := c.h.Dial(c.ctx, replica.Addr())
	if err != nil {
		c.t.Fatalf("property 18: dial the replica: %v", err)
	}
	c.t.Cleanup(closeR)
	onReplica := func(args ...any) (store.Reply, error) {
		rs, err := rst.Do(c.ctx, store.Cmd{Name: args[0].(string), Args: args[1:]})
		if err != nil {
			return store.Reply{}, err
		}
		return rs[0], nil
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r, err := onReplica("INFO", "replication")
		text, _ := store.String(r.Val)
		if err == nil && strings.Contains(text, "master_link_status:up") {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("property 18: the replica did not sync within 10s: %v %q", err, text)
		}
	}
	r, err := healthy.Allow(c.ctx, "p18", l)
	if err != nil || !r.Allowed {
		c.t.Fatalf("property 18: call before the promotion: %+v, %v", r, err)
	}
	used := l.Rate - r.Remaining
	// WAIT cannot be used here: it waits for the writes of the connection
	// it is sent on, and the decision above may have used another one of
	// the pool. The master's replication offset after the decision covers
	// it whichever connection wrote it.
	mr, err := c.do(store.Cmd{Name: "INFO", Args: []any{"replication"}})
	want, ok := replOffset(mr, "master_repl_offset")
	if err != nil || !ok {
		c.t.Fatalf("property 18: the master's replication offset: %v %v", mr.Val, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		rr, err := onReplica("INFO", "replication")
		got, ok := replOffset(rr, "slave_repl_offset")
		if err == nil && ok && got >= want {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("property 18: the replica did not reach the master's offset %d within 10s: at %d (%v)", want, got, err)
		}
	}
	if rr, err := onReplica("REPLICAOF", "NO", "ONE"); err != nil || rr.Err != nil {
		c.t.Fatalf("property 18: REPLICAOF NO ONE: %v %v", rr, err)
	}
	promoted := c.limiter(rst, limiter.WithTimeout(healthyTimeout))
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	r, err = promoted.Allow(ctx, "p18", l)
	cancel()
	if err != nil || !r.Allowed || r.Remaining != l.Rate-used-1 {
		c.t.Errorf("property 18: first call on the promoted replica = %+v, %v; want admitted with %d remaining (the count continues)", r, err, l.Rate-used-1)
	}
	// Every key under the prefix on the replica has a TTL within bounds.
	keys := c.scan(rst)
	if len(keys) == 0 {
		c.t.Errorf("property 18: the promoted replica holds no key under the prefix")
	}
	maxTTL := c.spec.life(l.Period) + time.Second
	for _, k := range keys {
		pr, err := onReplica("PTTL", k)
		n, _ := store.Int64(pr.Val)
		if err != nil || n <= 0 || time.Duration(n)*time.Millisecond > maxTTL {
			c.t.Errorf("property 18: key %s on the promoted replica has PTTL %v (%v); want 0 < PTTL ≤ %s", k, pr.Val, err, maxTTL)
		}
	}
}

// replOffset reads an offset field of an INFO replication reply.
func replOffset(r store.Reply, field string) (int64, bool) {
	text, _ := store.String(r.Val)
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
