package limiter_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/limitertest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// gatedDel holds the first DEL (Reset's) until release is closed, after
// closing started.
type gatedDel struct {
	store.Store
	once    sync.Once
	started chan struct{}
	release chan struct{}
}

func newGatedDel(st store.Store) *gatedDel {
	return &gatedDel{Store: st, started: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedDel) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if len(cmds) == 1 && cmds[0].Name == "DEL" {
		g.once.Do(func() {
			close(g.started)
			<-g.release
		})
	}
	return g.Store.Do(ctx, cmds...)
}

// TestResetRacesDenyCache: a denial Redis made while Reset was deleting
// the subject's counter saw the old count; it is not remembered, so once
// Reset returns the subject is decided by Redis again.
func TestResetRacesDenyCache(t *testing.T) {
	_, st := newMini(t)
	g := newGatedDel(st)
	lim := newLimiter(t, g, limiter.WithDenyCache(16))
	ctx := context.Background()
	l := limiter.PerMinute(2)
	for range 3 {
		if _, err := lim.Allow(ctx, "hot", l); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error)
	go func() { done <- lim.Reset(ctx, "hot", l) }()
	<-g.started
	// Sent before the DEL, answered from the old count.
	if r, err := lim.Allow(ctx, "hot", l); err != nil || r.Allowed || r.Cached {
		t.Fatalf("call during Reset: %+v, %v; want denied by Redis", r, err)
	}
	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r, err := lim.Allow(ctx, "hot", l); err != nil || !r.Allowed || r.Cached {
		t.Fatalf("after Reset returned: %+v, %v; want admitted by Redis (the count is 0)", r, err)
	}
}

// TestResetRacesLease: a lease taken while Reset was deleting the
// counter may have been counted in the deleted counter; its call is
// admitted, its other units are not used, so the window after the Reset
// admits at most the rate.
func TestResetRacesLease(t *testing.T) {
	_, st := newMini(t)
	g := newGatedDel(st)
	lim := newLimiter(t, g, limiter.WithQuotaLease(5))
	other := newLimiter(t, st) // another process, no lease
	ctx := context.Background()
	l := limiter.PerMinute(10)
	done := make(chan error)
	go func() { done <- lim.Reset(ctx, "s", l) }()
	<-g.started
	if r, err := lim.Allow(ctx, "s", l); err != nil || !r.Allowed {
		t.Fatalf("call during Reset: %+v, %v; want admitted", r, err)
	}
	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var admitted int64 // after Reset returned
	for range 20 {
		for _, x := range []*limiter.Limiter{other, lim} {
			r, err := x.Allow(ctx, "s", l)
			if err != nil {
				t.Fatal(err)
			}
			if r.Allowed {
				admitted++
			}
		}
	}
	if admitted != l.Rate {
		t.Fatalf("after Reset returned, the window admitted %d; want exactly the rate, %d", admitted, l.Rate)
	}
}

// TestReturnLeasesForgetsDenials: units given back by ReturnLeases end the
// process's remembered denials of the subject: a request they fit is
// decided by Redis, and admitted.
func TestReturnLeasesForgetsDenials(t *testing.T) {
	_, st := newMini(t)
	lim := newLimiter(t, st, limiter.WithQuotaLease(5), limiter.WithDenyCache(16))
	ctx := context.Background()
	l := limiter.PerMinute(10)
	if r, err := lim.Allow(ctx, "s", l); err != nil || !r.Leased {
		t.Fatalf("lease: %+v, %v", r, err) // Redis counts 5, the lease holds 4
	}
	if r, err := lim.AllowN(ctx, "s", 7, l); err != nil || r.Allowed {
		t.Fatalf("AllowN 7: %+v, %v; want denied (5 + 7 > 10)", r, err)
	}
	if r, err := lim.AllowN(ctx, "s", 7, l); err != nil || r.Allowed || !r.Cached {
		t.Fatalf("AllowN 7 again: %+v, %v; want the remembered denial", r, err)
	}
	if n, err := lim.ReturnLeases(ctx, 0); err != nil || n != 4 {
		t.Fatalf("ReturnLeases = %d, %v; want 4", n, err)
	}
	if r, err := lim.AllowN(ctx, "s", 7, l); err != nil || !r.Allowed || r.Cached {
		t.Fatalf("AllowN 7 after 4 units came back (1 of 10 used) = %+v, %v; want admitted by Redis", r, err)
	}
}

// slowReply delays every script reply by delay, after Redis ran it.
type slowReply struct {
	store.Store
	delay time.Duration
}

func (s *slowReply) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	v, err := s.Store.EvalSha(ctx, sha, keys, args)
	time.Sleep(s.delay)
	return v, err
}

func (s *slowReply) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	v, err := s.Store.Eval(ctx, src, keys, args)
	time.Sleep(s.delay)
	return v, err
}

// TestDenyCacheCountsFromTheSend: Redis measured a denial's RetryAfter
// before its reply travelled back; the deny cache counts it from when the
// request was sent, so it stops denying when Redis would admit again, not a
// reply's latency later.
func TestDenyCacheCountsFromTheSend(t *testing.T) {
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	const delay = 300 * time.Millisecond
	slow := &slowReply{Store: goredis.New(rdb)}
	lim, err := limiter.New(slow, strategy.NewGCRA(), limiter.WithDenyCache(16))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// 2 s, well beyond the delay: on a loaded machine the denial must
	// still be remembered when the next call comes
	l := limiter.Per(1, 2*time.Second)
	if r, err := lim.Allow(ctx, "s", l); err != nil || !r.Allowed {
		t.Fatalf("first call: %+v, %v", r, err)
	}
	slow.delay = delay
	sent := time.Now()
	r, err := lim.Allow(ctx, "s", l)
	slow.delay = 0
	if err != nil || r.Allowed {
		t.Fatalf("second call: %+v, %v; want denied", r, err)
	}
	// Redis admits again RetryAfter after it ran the call, which was
	// before the reply arrived, delay after the send at the latest.
	if c, err := lim.Allow(ctx, "s", l); err != nil || c.Allowed || !c.Cached || c.RetryAfter > r.RetryAfter-delay+50*time.Millisecond {
		t.Fatalf("remembered denial: %+v, %v; want RetryAfter about %s (counted from the send)", c, err, r.RetryAfter-time.Since(sent))
	}
	time.Sleep(time.Until(sent.Add(r.RetryAfter + 5*time.Millisecond)))
	if c, err := lim.Allow(ctx, "s", l); err != nil || c.Cached {
		t.Fatalf("RetryAfter after the send: %+v, %v; want decided by Redis, not the cache", c, err)
	}
}

// hungStore accepts commands and never answers.
type hungStore struct{ store.Store }

func (hungStore) EvalSha(ctx context.Context, _ string, _ []string, _ []any) (any, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (hungStore) Eval(ctx context.Context, _ string, _ []string, _ []any) (any, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (hungStore) Do(ctx context.Context, _ ...store.Cmd) ([]store.Reply, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestAllowManyEachBounds: without a batch (a store that cannot pipeline,
// a strategy without one script), the Limiter's timeout bounds the whole
// of AllowMany, and quota leases are not used.
func TestAllowManyEachBounds(t *testing.T) {
	_, st := newMini(t)
	lim := newLimiter(t, hungStore{st}, limiter.WithTimeout(100*time.Millisecond))
	asks := make([]limiter.Ask, 64)
	for i := range asks {
		asks[i] = limiter.Ask{Key: fmt.Sprint("k", i), Limits: []limiter.Limit{limiter.PerSecond(10)}}
	}
	start := time.Now()
	for i, a := range lim.AllowMany(context.Background(), asks) {
		if a.Err == nil {
			t.Fatalf("ask %d: %+v; want the timeout's error", i, a.Result)
		}
	}
	// 64 asks, 16 at a time: 400 ms if each had its own timeout
	if took := time.Since(start); took > 300*time.Millisecond {
		t.Errorf("AllowMany of 64 asks took %s with a 100ms timeout", took)
	}
	bucketed, err := limiter.New(st, strategy.NewBucketed(), limiter.WithQuotaLease(5))
	if err != nil {
		t.Fatal(err)
	}
	l := limiter.PerMinute(100)
	// (decided at once: either may be first)
	var remaining int64
	for i, a := range bucketed.AllowMany(context.Background(), []limiter.Ask{{Key: "s", Limits: []limiter.Limit{l}}, {Key: "s", Limits: []limiter.Limit{l}}}) {
		if a.Err != nil || !a.Result.Allowed || a.Result.Leased {
			t.Errorf("ask %d: %+v, %v; want admitted by Redis", i, a.Result, a.Err)
		}
		remaining += a.Result.Remaining
	}
	if remaining != 99+98 {
		t.Errorf("remaining %d in all; want 99 + 98, each decided by Redis", remaining)
	}
}

// TestLeaseOutageShared: with quota leases and Redis not answering, the
// callers waiting for a subject's lease share its outcome (here FailOpen's
// Degraded admission) instead of each taking a lease in turn, which would
// add up their timeouts: 8 callers take about one timeout, not eight.
func TestLeaseOutageShared(t *testing.T) {
	_, st := newMini(t)
	const timeout = 100 * time.Millisecond
	lim := newLimiter(t, hungStore{st}, limiter.WithTimeout(timeout), limiter.WithFailMode(limiter.FailOpen), limiter.WithQuotaLease(10))
	l := limiter.PerSecond(1000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var worst time.Duration
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			r, err := lim.Allow(context.Background(), "hot", l)
			took := time.Since(start)
			if err != nil || !r.Allowed || !r.Degraded || r.Leased {
				t.Errorf("Allow = %+v, %v; want FailOpen's Degraded admission", r, err)
			}
			mu.Lock()
			worst = max(worst, took)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if worst > 3*timeout+50*time.Millisecond {
		t.Fatalf("the slowest of 8 calls of one subject took %s with a %s timeout (in turn, they take 8 timeouts)", worst, timeout)
	}
}

// TestLeaseKeepsUnitsOfItsWindow: a call whose cost is more than what the
// lease holds takes a new lease in the same window and keeps the old
// units beside it, so a process alone in a window loses at most units−1:
// with leases of 10 and costs of 7 it admits 98 of 100, as without leases.
func TestLeaseKeepsUnitsOfItsWindow(t *testing.T) {
	_, st := newMini(t)
	const units = 10
	lim := newLimiter(t, st, limiter.WithQuotaLease(units))
	ctx := context.Background()
	l := limiter.PerHour(100)
	var admitted int64
	for range 30 {
		r, err := lim.AllowN(ctx, "s", 7, l)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed {
			admitted += 7
		}
	}
	if lost := 98 - admitted; lost < 0 || lost > units-1 {
		t.Fatalf("one process admitted %d units in costs of 7 of a window of 100 (98 possible): %d lost, more than units−1 = %d", admitted, lost, units-1)
	}
}

// gatedDecr holds the first transaction that carries a DECRBY (Bucketed's
// take-back of a denied request) until release is closed.
type gatedDecr struct {
	store.Store
	held    atomic.Bool
	started chan struct{}
	release chan struct{}
}

func (g *gatedDecr) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	for _, c := range cmds {
		if c.Name == "DECRBY" {
			if g.held.CompareAndSwap(false, true) {
				close(g.started)
				<-g.release
			}
			break
		}
	}
	return g.Store.Do(ctx, cmds...)
}

// TestDenyCacheTransientDenials: Bucketed counts a denied request's cost
// until its second transaction takes it back, and may deny another
// request meanwhile although its quota is there. The deny cache keeps
// such a denial for at most MaxTransientCached, not until the window ends.
func TestDenyCacheTransientDenials(t *testing.T) {
	_, st := newMini(t)
	g := &gatedDecr{Store: st, started: make(chan struct{}), release: make(chan struct{})}
	lim, err := limiter.New(g, strategy.NewBucketed(), limiter.WithDenyCache(16))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l := limiter.PerHour(10)
	if r, err := lim.AllowN(ctx, "s", 8, l); err != nil || !r.Allowed {
		t.Fatalf("8 of 10: %+v, %v", r, err)
	}
	over := make(chan limiter.Result)
	go func() { r, _ := lim.AllowN(ctx, "s", 5, l); over <- r }()
	<-g.started
	// 8 + 5 counted until the take-back: 1 more is denied, and remembered
	r, err := lim.Allow(ctx, "s", l)
	if err != nil || r.Allowed {
		t.Fatalf("during the over-count: %+v, %v; want denied", r, err)
	}
	close(g.release)
	if r := <-over; r.Allowed {
		t.Fatalf("5 on top of 8: %+v; want denied", r)
	}
	time.Sleep(limiter.MaxTransientCached)
	if r, err := lim.Allow(ctx, "s", l); err != nil || !r.Allowed || r.Cached {
		t.Fatalf("%s after the take-back: %+v, %v; want admitted by Redis (8 of 10 used)", limiter.MaxTransientCached, r, err)
	}
}

// gatedSubject holds the calls that give quota of subject back, Reset's
// DEL and the quota-return script's, until release is closed, after
// closing started.
type gatedSubject struct {
	store.Store
	subject string // in braces, as in its keys
	once    sync.Once
	started chan struct{}
	release chan struct{}
}

func newGatedSubject(st store.Store, subject string) *gatedSubject {
	return &gatedSubject{Store: st, subject: "{" + subject + "}", started: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedSubject) hold(key string) {
	if strings.Contains(key, g.subject) {
		g.once.Do(func() { close(g.started) })
		<-g.release
	}
}

func (g *gatedSubject) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if len(cmds) == 1 && cmds[0].Name == "DEL" {
		g.hold(fmt.Sprint(cmds[0].Args...))
	}
	return g.Store.Do(ctx, cmds...)
}

func (g *gatedSubject) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	if sha == strategy.QuotaReturnScript().Hash() {
		g.hold(keys[0])
	}
	return g.Store.EvalSha(ctx, sha, keys, args)
}

// TestGiveBackOfAnotherSubject: while this process gives quota of one
// subject back (Reset, ReturnLeases), another subject's leases are kept
// as usual: 100 calls of it at 100/min, leases of 10, are all admitted, 10
// leases. (Any give-back used to make every subject's new lease admit its
// own call only: 10 of 100 admitted, the window's quota burnt.)
func TestGiveBackOfAnotherSubject(t *testing.T) {
	l := limiter.PerMinute(100)
	for _, how := range []string{"Reset", "ReturnLeases"} {
		m, st := newMini(t)
		g := newGatedSubject(st, "slow")
		lim := newLimiter(t, g, limiter.WithQuotaLease(10))
		ctx := context.Background()
		if r, err := lim.Allow(ctx, "slow", l); err != nil || !r.Leased {
			t.Fatalf("%s: lease of slow: %+v, %v", how, r, err)
		}
		done := make(chan error, 1)
		go func() {
			if how == "Reset" {
				done <- lim.Reset(ctx, "slow", l)
				return
			}
			_, err := lim.ReturnLeases(ctx, 0)
			done <- err
		}()
		<-g.started
		admitted := 0
		for range 100 {
			r, err := lim.Allow(ctx, "hot", l)
			if err != nil {
				t.Fatal(err)
			}
			if r.Allowed {
				admitted++
			}
		}
		close(g.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		key, _ := limiter.Key(limiter.DefaultPrefix, "hot", l)
		counted, _ := m.Get(key)
		if admitted != 100 || counted != "100" {
			t.Errorf("during %s of another subject: %d of 100 calls of hot admitted, Redis counted %s; want 100 and 100", how, admitted, counted)
		}
	}
}

// TestReturnLeasesKeepsUnitsNotReturned: ReturnLeases leaves a lease the
// units it does not give back (here, a window of 150 ms, too short to
// tell from the next one): the next 9 calls are admitted from it, without
// a round trip, and Redis still counts the one lease. (They were dropped:
// the next call took a second lease, 20 counted for 2 admitted.)
func TestReturnLeasesKeepsUnitsNotReturned(t *testing.T) {
	// on a clock that moves only when told, so that the window stays open
	// however slow the machine
	lim, clock := limitertest.New(t, strategy.NewFixedWindow(), limiter.WithQuotaLease(10))
	m := clock.Server()
	ctx := context.Background()
	l := limiter.Per(100, 150*time.Millisecond)
	if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Leased {
		t.Fatalf("lease: %+v, %v", r, err)
	}
	if n, err := lim.ReturnLeases(ctx, 0); err != nil || n != 0 {
		t.Fatalf("ReturnLeases = %d, %v; want 0 (the window is too short)", n, err)
	}
	key, _ := limiter.Key(limiter.DefaultPrefix, "u", l)
	for i := range 9 {
		if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed || !r.Leased {
			t.Fatalf("call %d after ReturnLeases: %+v, %v; want admitted from the lease", i+2, r, err)
		}
	}
	if counted, _ := m.Get(key); counted != "10" {
		t.Errorf("Redis counted %s for 10 calls; want 10 (one lease)", counted)
	}
}

// TestResetForgetsCopies: a With copy with a deny cache or quota leases of
// its own counts on the same keys as its original: the original's Reset
// forgets the subject in the copy's too (the copy kept denying for an hour
// what Redis admitted, and its lease admitted 4 more on top of a fresh
// window: 14 of 10), and a copy's ReturnLeases forgets another copy's
// denials.
func TestResetForgetsCopies(t *testing.T) {
	ctx := context.Background()
	l := limiter.PerHour(1)
	t.Run("deny cache", func(t *testing.T) {
		_, st := newMini(t)
		lim := newLimiter(t, st)
		cached, err := lim.With(limiter.WithDenyCache(16))
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []bool{true, false} {
			if r, err := cached.Allow(ctx, "u", l); err != nil || r.Allowed != want {
				t.Fatalf("call %d: %+v, %v; want allowed %v", i, r, err, want)
			}
		}
		if err := lim.Reset(ctx, "u", l); err != nil {
			t.Fatal(err)
		}
		if r, err := cached.Allow(ctx, "u", l); err != nil || !r.Allowed || r.Cached {
			t.Errorf("the copy after its original's Reset: %+v, %v; want admitted by Redis", r, err)
		}
	})
	t.Run("leases", func(t *testing.T) {
		_, st := newMini(t)
		lim := newLimiter(t, st)
		leased, err := lim.With(limiter.WithQuotaLease(5))
		if err != nil {
			t.Fatal(err)
		}
		l := limiter.PerHour(10)
		if r, err := leased.Allow(ctx, "u", l); err != nil || !r.Allowed {
			t.Fatalf("first call: %+v, %v", r, err)
		}
		if err := lim.Reset(ctx, "u", l); err != nil {
			t.Fatal(err)
		}
		admitted := 0
		for _, x := range []*limiter.Limiter{lim, leased} {
			for range 30 {
				r, err := x.Allow(ctx, "u", l)
				if err != nil {
					t.Fatal(err)
				}
				if r.Allowed {
					admitted++
				}
			}
		}
		if admitted != 10 {
			t.Errorf("after Reset, the window admitted %d through the original and its leasing copy; want 10", admitted)
		}
	})
	t.Run("return leases", func(t *testing.T) {
		_, st := newMini(t)
		base := newLimiter(t, st)
		lim, err := base.With(limiter.WithQuotaLease(5))
		if err != nil {
			t.Fatal(err)
		}
		cached, err := base.With(limiter.WithDenyCache(16))
		if err != nil {
			t.Fatal(err)
		}
		l := limiter.PerHour(6)
		// one copy's lease takes 5 (1 admitted, 4 left); the other's
		// first call takes the sixth, its second is denied and cached
		if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed {
			t.Fatalf("leased call: %+v, %v", r, err)
		}
		for i, want := range []bool{true, false} {
			if r, err := cached.Allow(ctx, "u", l); err != nil || r.Allowed != want {
				t.Fatalf("copy's call %d: %+v, %v; want allowed %v", i, r, err, want)
			}
		}
		if n, err := lim.ReturnLeases(ctx, 0); err != nil || n != 4 {
			t.Fatalf("ReturnLeases: %d, %v; want 4", n, err)
		}
		if r, err := cached.Allow(ctx, "u", l); err != nil || !r.Allowed || r.Cached {
			t.Errorf("a copy after another returned 4 units: %+v, %v; want admitted by Redis", r, err)
		}
	})
}
