// Package adaptertest holds the tests that every store adapter runs on a
// real redis-server in a state the conformance harnesses do not make.
package adaptertest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// Busy proves st, connected to the private redis-server at addr, while
// another client's script holds the server (BUSY replies): every
// strategy's call fails with an error naming BUSY, admits nothing and
// crashes nothing; once the script is killed, every call succeeds again.
func Busy(t *testing.T, st store.Store, addr string) {
	ctx := context.Background()
	// A day: Bucketed's epoch-aligned window does not end during the test.
	l := limiter.PerDay(1000)
	strategies, lims := admitted(t, st, "busy", l)
	end := redistest.Busy(t, addr)
	for round := 0; round < 3; round++ {
		for i, lim := range lims {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			r, err := lim.Allow(cctx, "u", l)
			cancel()
			if err == nil || !strings.Contains(err.Error(), "BUSY") {
				t.Errorf("%T while the server is busy: %+v, %v; want an error naming BUSY", strategies[i], r, err)
			}
		}
	}
	end()
	for i, lim := range lims {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		r, err := lim.Allow(cctx, "u", l)
		cancel()
		if err != nil || !r.Allowed || r.Remaining != l.Rate-2 {
			t.Errorf("%T after the script was killed: %+v, %v; want admitted with %d remaining (the busy calls counted nothing)", strategies[i], r, err, l.Rate-2)
		}
	}
}

// strategies returns one of each strategy the module ships.
func strategies() []limiter.Strategy {
	var ss []limiter.Strategy
	for _, spec := range conformance.Strategies() {
		if spec.Strategy != nil {
			ss = append(ss, spec.Strategy)
		}
	}
	return ss
}

// admitted returns a Limiter on st for each strategy, under prefix and its
// index, after one call of each for subject "u" at l, which must succeed.
func admitted(t *testing.T, st store.Store, prefix string, l limiter.Limit) ([]limiter.Strategy, []*limiter.Limiter) {
	t.Helper()
	ss := strategies()
	lims := make([]*limiter.Limiter, len(ss))
	for i, s := range ss {
		lim, err := limiter.New(st, s, limiter.WithPrefix(fmt.Sprintf("%s%d", prefix, i)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lim.Allow(context.Background(), "u", l); err != nil {
			t.Fatalf("%T: first call, on a healthy server: %v", s, err)
		}
		lims[i] = lim
	}
	return ss, lims
}

// Refused proves st, whose connections the server refuses to set up (a
// wrong password), on every strategy's path (a script, a transaction, a
// pipeline on a watched connection): each call fails with the server's
// WRONGPASS, never a nil reply, and never an unknown outcome, since nothing
// was sent.
func Refused(t *testing.T, st store.Store) {
	for _, s := range strategies() {
		lim, err := limiter.New(st, s)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := lim.Allow(ctx, "u", limiter.PerMinute(5))
		cancel()
		switch {
		case err == nil:
			t.Errorf("%T on a refused connection = %+v, no error", s, r)
		case errors.Is(err, store.ErrNil) || errors.Is(err, store.ErrUnknownOutcome) || !strings.Contains(err.Error(), "WRONGPASS"):
			t.Errorf("%T on a refused connection: %v; want the server's WRONGPASS, not a nil reply or an unknown outcome", s, err)
		}
	}
}

// tlsChecks are the checks every adapter runs over TLS: the core
// accounting and TTL properties, and the fault checks through a proxy that
// ends and restarts TLS (a lost reply, a cut between commands, a server
// that blackholes, a restart that empties the script cache).
var tlsChecks = []string{
	"exact-admission", "multi-rule-all-or-nothing", "window-never-slides", "bounded-ttls",
	"lost-reply-counted-once", "crash-between-commands", "redis-down-or-blackholed", "noscript-invisible", "server-conditions",
}

// ConformanceTLS runs tlsChecks on a redis-server that accepts only TLS,
// with stores from d, for one strategy per way of using a store
// (conformance.StorePaths), in parallel with the package's other parallel
// tests (each check has a server of its own).
func ConformanceTLS(t *testing.T, d conformance.TLSDialer) {
	t.Parallel()
	mk := conformance.RedisServerTLS(d)
	for _, spec := range conformance.StorePaths() {
		for _, name := range tlsChecks {
			ch, ok := conformance.CheckByName(name)
			if !ok {
				t.Fatalf("no check %s", name)
			}
			t.Run(spec.Name+"/"+name, func(t *testing.T) { conformance.RunCheck(t, mk, spec, ch) })
		}
	}
}

// IdleClosed proves that a store whose idle connections the server has
// closed (its timeout setting, here 1 s) makes its next call on a new
// connection: every strategy's call after the server closed the pool's
// connections succeeds and counts once, over plain TCP (a store from plain)
// and over TLS (a store from overTLS), where the client cannot see the
// closed socket through the TLS connection unless the adapter shows it.
func IdleClosed(t *testing.T, plain conformance.Dialer, overTLS conformance.TLSDialer) {
	t.Run("tcp", func(t *testing.T) {
		t.Parallel()
		s := redistest.StartServer(t, "--timeout", "1")
		idleClosed(t, plain, s.Addr())
	})
	t.Run("tls", func(t *testing.T) {
		t.Parallel()
		s := redistest.StartTLSServer(t, "--timeout", "1")
		idleClosed(t, overTLS(s.TLS().ClientConfig()), s.Addr())
	})
}

func idleClosed(t *testing.T, d conformance.Dialer, addr string) {
	ctx := context.Background()
	st, closeFn, err := d(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeFn)
	l := limiter.PerDay(1000)
	strategies, lims := admitted(t, st, "idle", l)
	// The server closes a connection idle for more than its timeout on its
	// next check of clients, within a second or two after that.
	time.Sleep(3500 * time.Millisecond)
	for i, lim := range lims {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		r, err := lim.Allow(cctx, "u", l)
		cancel()
		if err != nil || !r.Allowed || r.Remaining != l.Rate-2 {
			t.Errorf("%T after the server closed its idle connections: %+v, %v; want admitted with %d remaining", strategies[i], r, err, l.Rate-2)
		}
	}
}

// Unreachable proves the errors of a store that cannot connect: a refused
// connection (a port nobody listens on, a store from plain) and a
// certificate the client does not trust (a store from overTLS with an
// empty configuration). Every strategy's call fails within its deadline
// with an error that keeps the cause (syscall.ECONNREFUSED, the x509
// error), matches context.DeadlineExceeded when it ended at the deadline,
// and is not store.ErrUnknownOutcome: nothing was sent.
func Unreachable(t *testing.T, plain conformance.Dialer, overTLS conformance.TLSDialer) {
	closed := redistest.RefusedAddr(t)
	s := redistest.StartTLSServer(t)
	cases := []struct {
		name  string
		d     conformance.Dialer
		addr  string
		cause func(error) bool
	}{
		{"refused", plain, closed, func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }},
		{"untrusted", overTLS(&tls.Config{MinVersion: tls.VersionTLS12}), s.Addr(), func(err error) bool {
			var cert *tls.CertificateVerificationError
			var unknown x509.UnknownAuthorityError
			return errors.As(err, &cert) || errors.As(err, &unknown)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			st, closeFn, err := c.d(context.Background(), c.addr)
			if err != nil {
				if !c.cause(err) {
					t.Fatalf("dial: %v, want the cause", err)
				}
				return // the client refuses to be made: the cause is plain
			}
			t.Cleanup(closeFn)
			for _, s := range strategies() {
				lim, err := limiter.New(st, s)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				start := time.Now()
				r, err := lim.Allow(ctx, "u", limiter.PerMinute(5))
				took := time.Since(start)
				dl := ctx.Err() != nil
				cancel()
				switch {
				case err == nil:
					t.Errorf("%T: %+v, no error", s, r)
				case !c.cause(err):
					t.Errorf("%T: %v; the cause is not in the chain", s, err)
				case errors.Is(err, store.ErrUnknownOutcome):
					t.Errorf("%T: %v; an unknown outcome, but nothing was sent", s, err)
				case dl && !errors.Is(err, context.DeadlineExceeded):
					t.Errorf("%T: ended at the deadline with %v, which does not match context.DeadlineExceeded", s, err)
				case took > 3*time.Second:
					t.Errorf("%T: returned after %v with a 2s deadline", s, took)
				}
			}
		})
	}
}

// ManySubjects runs property 25 over 100 000 distinct subjects on a
// redis-server through stores from d: every key is gone shortly after its
// 1 s window and the client's live heap did not grow with the key space.
// The suite's own run of property 25 decides 10 000 subjects per strategy;
// this one is the production-sized key space, once per adapter, for the
// strategy whose path is a script (a client's per-call state is the same
// for every strategy that takes it).
func ManySubjects(t *testing.T, d conformance.Dialer) {
	t.Parallel()
	conformance.RunCheck(t, conformance.RedisServer(d), conformance.FixedWindow(), conformance.Cardinality(100000))
}

// leaseChecks are the checks of admission that QuotaLeases runs: how
// many are admitted under contention, with weighted costs and several
// limits, at windows' edges, after denials, in batches. The others read a
// counter as the count of admitted units, or a Result's Remaining as the
// server's, which a quota lease makes differ by design (units leased and
// not yet admitted).
var leaseChecks = map[string]bool{
	"exact-admission": true, "weighted-costs": true, "multi-rule-all-or-nothing": true,
	"window-never-slides": true, "short-and-long-windows": true, "app-clock-skew": true,
	"boundary-bursts": true, "replies-slower-than-window": true, "denials-bind": true, "allow-many-exact": true,
	"window-quota-reset": true,
}

// QuotaLeases runs the suite's checks of admission (leaseChecks) with
// FixedWindow and AlignedWindow through a Limiter that leases quota
// (conformance.FixedWindowLeased, AlignedWindowLeased) on each backend of
// mks: no check may see an admission beyond the limit.
func QuotaLeases(t *testing.T, mks map[string]conformance.HarnessMaker) {
	t.Parallel()
	for name, mk := range mks {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, spec := range []conformance.Spec{conformance.FixedWindowLeased(), conformance.AlignedWindowLeased()} {
				t.Run(spec.Name, func(t *testing.T) {
					for _, ch := range conformance.Checks() {
						if !ch.For(spec) || !leaseChecks[ch.Name] {
							continue
						}
						t.Run(fmt.Sprintf("P%02d-%s", ch.ID, ch.Name), func(t *testing.T) { conformance.RunCheck(t, mk, spec, ch) })
					}
				})
			}
		})
	}
}

// manyCalls numbers AllowManyCalls' calls, whose keys it keeps apart.
var manyCalls atomic.Int64

// AllowManyCalls checks what store.OneServer means for Limiter.AllowMany
// through st, a Store on one redis-server the test may reset the
// statistics of: it makes 8 decisions with one AllowMany (FixedWindow, 8
// subjects, all admitted) and counts the script calls the server ran
// (INFO commandstats): one when st.OneServer() says one server holds every
// key, 8 otherwise. Every decision must be admitted with 4 of 5 remaining.
func AllowManyCalls(t testing.TB, st store.Store, wantOne bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	one, ok := st.(store.OneServer)
	if !ok || one.OneServer() != wantOne {
		t.Fatalf("OneServer: %v (implemented: %v), want %v", ok && one.OneServer(), ok, wantOne)
	}
	lim, err := limiter.New(st, strategy.NewFixedWindow(), limiter.WithPrefix(fmt.Sprintf("many-%d", manyCalls.Add(1))))
	if err != nil {
		t.Fatal(err)
	}
	l := limiter.PerHour(5)
	asks := make([]limiter.Ask, 8)
	for i := range asks {
		asks[i] = limiter.Ask{Key: fmt.Sprintf("s%d", i), Limits: []limiter.Limit{l}}
	}
	lim.AllowMany(ctx, asks) // the script cache filled (EVAL after NOSCRIPT)
	if rs, err := st.Do(ctx, store.Cmd{Name: "CONFIG", Args: []any{"RESETSTAT"}}); err != nil || rs[0].Err != nil {
		t.Fatalf("CONFIG RESETSTAT: %v %v", err, rs)
	}
	for i, a := range lim.AllowMany(ctx, asks) {
		if a.Err != nil || !a.Result.Allowed || a.Result.Remaining != 3 {
			t.Fatalf("ask %d: %+v, %v; want admitted with 3 remaining", i, a.Result, a.Err)
		}
	}
	rs, err := st.Do(ctx, store.Cmd{Name: "INFO", Args: []any{"commandstats"}})
	if err != nil || rs[0].Err != nil {
		t.Fatalf("INFO commandstats: %v %v", err, rs)
	}
	info, _ := rs[0].Val.(string)
	calls := int64(-1)
	for _, line := range strings.Split(info, "\n") {
		if rest, found := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:calls="); found {
			calls, _ = strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
		}
	}
	want := int64(8)
	if wantOne {
		want = 1
	}
	if calls != want {
		t.Errorf("AllowMany of 8 asks ran %d EVALSHA calls on the server, want %d (OneServer %v)", calls, want, wantOne)
	}
}
