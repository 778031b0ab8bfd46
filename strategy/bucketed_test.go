package strategy_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// counting counts a store's round trips and records the command names of
// each, so tests can assert what a decision sends.
type counting struct {
	store.Store
	trips atomic.Int64
	last  atomic.Pointer[[]string]
	fail  atomic.Pointer[error] // returned by the next Do instead of running it
}

func (c *counting) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if e := c.fail.Swap(nil); e != nil {
		return nil, *e
	}
	c.trips.Add(1)
	names := make([]string, len(cmds))
	for i, cmd := range cmds {
		names[i] = cmd.Name
	}
	c.last.Store(&names)
	return c.Store.Do(ctx, cmds...)
}

func (c *counting) lastCmds() string {
	if p := c.last.Load(); p != nil {
		return strings.Join(*p, " ")
	}
	return ""
}

func newMini(t *testing.T) (*redistest.Mini, store.Store) {
	t.Helper()
	m := redistest.NewMini(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return m, goredis.New(rdb)
}

// realServer starts a redis-server for the test and returns a go-redis
// client of it.
func realServer(t *testing.T) *redis.Client {
	t.Helper()
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func newLim(t *testing.T, st store.Store, s limiter.Strategy) *limiter.Limiter {
	t.Helper()
	l, err := limiter.New(st, s, limiter.WithPrefix("t"))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// earlierRelease returns the script of an earlier release kept verbatim in
// testdata, for tests that mix releases on one key.
func earlierRelease(t *testing.T, name string) *store.Script {
	t.Helper()
	return store.NewScript(readSrc(t, filepath.Join("testdata", name)))
}

func pttl(t *testing.T, m *redistest.Mini, key string) time.Duration {
	t.Helper()
	if !m.Exists(key) {
		t.Fatalf("key %q does not exist; keys: %q", key, m.Keys())
	}
	return m.TTL(key)
}

// bucketKey is the key Bucketed counts l in for subject at server time now.
func bucketKey(t *testing.T, subject string, l limiter.Limit, now time.Time) string {
	t.Helper()
	k, err := limiter.Key("t", subject, l)
	if err != nil {
		t.Fatal(err)
	}
	return k + ":" + strconv.FormatInt(now.UnixMilli()/l.Period.Milliseconds(), 10)
}

// TestBucketedKeysAndExpiry: the key is key:⌊epoch ms / period⌋ by the
// server's clock, even with an app clock an hour off, and its absolute
// expiry (window end + grace) is the same on every call of the window.
func TestBucketedKeysAndExpiry(t *testing.T) {
	m, st := newMini(t)
	m.Advance(1234 * time.Millisecond) // mid-window
	skewed := func() time.Time { return time.Now().Add(time.Hour) }
	lim := newLim(t, st, strategy.NewBucketed(strategy.WithClock(skewed), strategy.WithGrace(300*time.Millisecond)))
	l := limiter.PerSecond(3)

	now := m.Now()
	r, err := lim.Allow(context.Background(), "u", l)
	if err != nil || !r.Allowed || r.Remaining != 2 {
		t.Fatalf("first call = %+v, %v", r, err)
	}
	key := bucketKey(t, "u", l, now)
	left := time.Second - time.Duration(now.UnixMilli()%1000)*time.Millisecond
	if r.ResetAfter != left {
		t.Errorf("ResetAfter %s, want %s (the window's end by the server's clock)", r.ResetAfter, left)
	}
	if got := pttl(t, m, key); got != left+300*time.Millisecond {
		t.Errorf("PTTL %s, want %s (window end + grace)", got, left+300*time.Millisecond)
	}
	m.Advance(100 * time.Millisecond)
	for i := range 3 {
		r, err := lim.Allow(context.Background(), "u", l)
		if err != nil || r.Allowed != (i < 2) {
			t.Fatalf("call %d = %+v, %v", i+2, r, err)
		}
	}
	if got := pttl(t, m, key); got != left+200*time.Millisecond {
		t.Errorf("PTTL %s after 100ms, want %s: the absolute expiry moved", got, left+200*time.Millisecond)
	}
	if r, _ := lim.Peek(context.Background(), "u", l); r.Allowed || r.RetryAfter != left-100*time.Millisecond {
		t.Errorf("Peek of the full window = %+v, want denied with RetryAfter %s", r, left-100*time.Millisecond)
	}
	// The next window is a new key; the old one lives out its grace.
	m.Advance(left - 100*time.Millisecond)
	if r, err := lim.Allow(context.Background(), "u", l); err != nil || !r.Allowed || r.Remaining != 2 {
		t.Fatalf("first call of the next window = %+v, %v", r, err)
	}
	if next := bucketKey(t, "u", l, m.Now()); next == key || !m.Exists(next) {
		t.Errorf("next window's key %q (old %q); keys %q", next, key, m.Keys())
	}
}

// TestBucketedRoundTrips: one TIME per store on first use, then one round
// trip per admitted decision, two per denied one (the compensation), one
// per peek; a denied request consumes nothing once compensated, from any
// limit.
func TestBucketedRoundTrips(t *testing.T) {
	_, mst := newMini(t)
	st := &counting{Store: mst}
	lim := newLim(t, st, strategy.NewBucketed())
	ctx := context.Background()
	minute, hour := limiter.PerMinute(2), limiter.PerHour(10)

	step := func(name string, f func() (limiter.Result, error), allowed bool, trips int64, last string) {
		t.Helper()
		before := st.trips.Load()
		r, err := f()
		if err != nil || r.Allowed != allowed {
			t.Fatalf("%s = %+v, %v; want allowed=%v", name, r, err, allowed)
		}
		if n := st.trips.Load() - before; n != trips {
			t.Errorf("%s: %d round trips, want %d", name, n, trips)
		}
		if got := st.lastCmds(); got != last {
			t.Errorf("%s: last round trip %q, want %q", name, got, last)
		}
	}
	allow := func() (limiter.Result, error) { return lim.Allow(ctx, "u", minute, hour) }
	tx := "MULTI TIME INCRBY PEXPIREAT INCRBY PEXPIREAT EXEC"
	comp := "MULTI SET DECRBY PEXPIREAT SET DECRBY PEXPIREAT EXEC"
	step("first call", allow, true, 2, tx)
	step("second call", allow, true, 1, tx)
	step("third call", allow, false, 2, comp)
	step("peek", func() (limiter.Result, error) { return lim.Peek(ctx, "u", minute, hour) }, false, 1, "MULTI TIME GET GET EXEC")
	step("cost 0", func() (limiter.Result, error) { return lim.AllowN(ctx, "u", 0, minute, hour) }, true, 1, "MULTI TIME GET GET EXEC")
	step("cost above the limit", func() (limiter.Result, error) { return lim.AllowN(ctx, "u", 3, minute, hour) }, false, 1, "MULTI TIME GET GET EXEC")

	// Both limits read 2: the denial took its cost back from the hour too.
	r, err := lim.Peek(ctx, "u", hour)
	if err != nil || r.Remaining != 8 {
		t.Errorf("hour limit after 2 admitted and 1 denied = %+v, %v; want 8 remaining", r, err)
	}
	r, err = lim.AllowN(ctx, "u", 3, minute, hour)
	if err != nil || r.Allowed || r.RetryAfter != -1 || r.Index != 0 {
		t.Errorf("cost 3 with a 2/min limit = %+v, %v; want denied by the minute limit, RetryAfter -1", r, err)
	}
}

// TestBucketedMovesToTheServersWindow: when the server's clock has moved
// past the window the app clock's estimate names (a jump, a call at a
// window's end), the decision is taken back from that window and made in
// the server's, in one more round trip.
func TestBucketedMovesToTheServersWindow(t *testing.T) {
	m, mst := newMini(t)
	st := &counting{Store: mst}
	lim := newLim(t, st, strategy.NewBucketed())
	ctx := context.Background()
	l := limiter.PerSecond(5)
	if _, err := lim.Allow(ctx, "u", l); err != nil { // syncs the clock
		t.Fatal(err)
	}
	old := bucketKey(t, "u", l, m.Now())
	m.Advance(3 * time.Second) // the app clock did not move: its estimate is 3 windows behind
	before := st.trips.Load()
	r, err := lim.Allow(ctx, "u", l)
	if err != nil || !r.Allowed || r.Remaining != 4 {
		t.Fatalf("call after the jump = %+v, %v; want admitted, 4 remaining", r, err)
	}
	if n := st.trips.Load() - before; n != 2 {
		t.Errorf("%d round trips, want 2 (the stamped one, then the move)", n)
	}
	if got, want := st.lastCmds(), "MULTI SET DECRBY PEXPIREAT TIME INCRBY PEXPIREAT EXEC"; got != want {
		t.Errorf("the move sent %q, want %q", got, want)
	}
	if m.Exists(old) {
		t.Errorf("the old window's key %q outlived its window and grace", old)
	}
	cur := bucketKey(t, "u", l, m.Now())
	if v, err := m.Get(cur); err != nil || v != "1" {
		t.Errorf("the server's window %q holds %q, %v; want 1", cur, v, err)
	}
	// Estimates are synced again: the next call takes one round trip.
	before = st.trips.Load()
	if _, err := lim.Allow(ctx, "u", l); err != nil {
		t.Fatal(err)
	}
	if n := st.trips.Load() - before; n != 1 {
		t.Errorf("%d round trips after the move, want 1", n)
	}
}

// TestBucketedErrors: a failed round trip is an error that writes nothing
// further; a failed compensation still returns the denial.
func TestBucketedErrors(t *testing.T) {
	m, mst := newMini(t)
	st := &counting{Store: mst}
	lim := newLim(t, st, strategy.NewBucketed())
	ctx := context.Background()
	l := limiter.PerMinute(1)
	boom := errors.New("boom")
	st.fail.Store(&boom)
	if _, err := lim.Allow(ctx, "u", l); !errors.Is(err, boom) {
		t.Errorf("a failed TIME sample = %v, want it returned", err)
	}
	if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed {
		t.Fatalf("%+v, %v", r, err)
	}
	// Denied, and the compensation fails: the denial stands, the over-count
	// stays until the window ends, with the window's TTL.
	var calls atomic.Int64
	lim2 := newLim(t, &failNth{Store: mst, n: 2, calls: &calls}, strategy.NewBucketed())
	r, err := lim2.Allow(ctx, "u", l)
	if err != nil || r.Allowed || r.Degraded || r.Cause == nil || !strings.Contains(r.Cause.Error(), "lost") {
		t.Errorf("denied call whose compensation failed = %+v, %v; want denied, no error, the failure as Cause", r, err)
	}
	key := bucketKey(t, "u", l, m.Now())
	if v, _ := m.Get(key); v != "2" {
		t.Errorf("counter %q, want 2 (the over-count of a lost compensation)", v)
	}
	if ttl := m.TTL(key); ttl <= 0 || ttl > l.Period+time.Second {
		t.Errorf("TTL %s after a lost compensation", ttl)
	}
}

// failNth fails its n-th Do (counting from 1), after the first use's TIME.
type failNth struct {
	store.Store
	n     int64
	calls *atomic.Int64
}

func (f *failNth) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if cmds[0].Name != "TIME" || len(cmds) > 1 {
		if f.calls.Add(1) == f.n {
			return nil, errors.New("lost")
		}
	}
	return f.Store.Do(ctx, cmds...)
}

// valueStore is a store whose dynamic type is not comparable: the
// per-store clock map must not panic on it.
type valueStore struct {
	store.Store
	tags []string
}

func TestBucketedReset(t *testing.T) {
	m, st := newMini(t)
	lim := newLim(t, valueStore{Store: st}, strategy.NewBucketed())
	ctx := context.Background()
	l := limiter.PerMinute(1)
	if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed {
		t.Fatalf("%+v, %v", r, err)
	}
	if err := lim.Reset(ctx, "u", l); err != nil {
		t.Fatal(err)
	}
	if ks := m.Keys(); len(ks) != 0 {
		t.Errorf("keys after Reset: %q", ks)
	}
	if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed {
		t.Errorf("after Reset = %+v, %v", r, err)
	}
}

// jumping moves the server's clock by jump before every round trip but the
// first: every transaction's TIME names a later window than the one the
// decision was stamped with.
type jumping struct {
	store.Store
	m     *redistest.Mini
	jump  time.Duration
	trips atomic.Int64
}

func (j *jumping) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if j.trips.Add(1) > 1 {
		j.m.Advance(j.jump)
	}
	return j.Store.Do(ctx, cmds...)
}

// TestBucketedStaleDecisionDenied: a decision that the server's TIME places
// in other windows on every attempt (a round trip as long as a window) is
// taken back and denied with a RetryAfter, counted in no window.
func TestBucketedStaleDecisionDenied(t *testing.T) {
	m, mst := newMini(t)
	st := &jumping{Store: mst, m: m, jump: 3 * time.Second}
	lim := newLim(t, st, strategy.NewBucketed())
	ctx := context.Background()
	l := limiter.PerSecond(5)
	r, err := lim.Allow(ctx, "u", l)
	if err != nil || r.Allowed || r.Degraded || r.RetryAfter <= 0 || r.RetryAfter > l.Period {
		t.Fatalf("a decision stamped wrong on every attempt = %+v, %v; want denied with RetryAfter in (0, 1s]", r, err)
	}
	for _, k := range m.Keys() {
		if v, _ := m.Get(k); v != "0" {
			t.Errorf("key %q holds %q after a stale decision; want 0 or gone", k, v)
		}
	}
	st.jump = 0
	if r, err := lim.Allow(ctx, "u", l); err != nil || !r.Allowed || r.Remaining != 4 {
		t.Errorf("the next call with the clock still = %+v, %v; want admitted with 4 remaining", r, err)
	}
}
