package strategy_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// TestFixedWindowReturnsLeases: a quota lease's unused units go back to the
// window they were counted in, and another process admits them, exactly
// the Rate in all; a window deleted and counted anew gets nothing; a return
// checks the window's end, the count and the key's type before writing. On
// miniredis and on a redis-server.
func TestFixedWindowReturnsLeases(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) (*redis.Client, func(time.Duration)){
		"miniredis": func(t *testing.T) (*redis.Client, func(time.Duration)) {
			m, _ := newMini(t)
			rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
			t.Cleanup(func() { _ = rdb.Close() })
			// the lease table runs on the process's clock: move both
			return rdb, func(d time.Duration) { m.Advance(d); time.Sleep(d) }
		},
		"redis-server": func(t *testing.T) (*redis.Client, func(time.Duration)) { return realServer(t), time.Sleep },
	} {
		t.Run(name, func(t *testing.T) {
			rdb, advance := open(t)
			st := goredis.New(rdb)
			testReturnLeases(t, rdb, st, advance)
		})
	}
}

func testReturnLeases(t *testing.T, rdb *redis.Client, st store.Store, advance func(time.Duration)) {
	ctx := context.Background()
	fw := strategy.NewFixedWindow()
	leased, err := limiter.New(st, fw, limiter.WithPrefix("t"), limiter.WithQuotaLease(10))
	if err != nil {
		t.Fatal(err)
	}
	direct := newLim(t, st, fw)
	l := limiter.PerHour(100)
	key, _ := limiter.Key("t", "s", l)
	count := func(key string) string { t.Helper(); return rdb.Get(ctx, key).Val() }

	if r, err := leased.Allow(ctx, "s", l); err != nil || !r.Allowed || !r.Leased {
		t.Fatalf("first call: %+v, %v; want admitted from a lease", r, err)
	}
	if c := count(key); c != "10" {
		t.Fatalf("counter %q after a lease of 10, want 10", c)
	}
	ttl := rdb.PTTL(ctx, key).Val()
	if n, err := leased.ReturnLeases(ctx, time.Hour); err != nil || n != 0 || count(key) != "10" {
		t.Fatalf("ReturnLeases of leases idle for an hour = %d, %v (counter %s); want 0 returned: the lease admitted just now", n, err, count(key))
	}
	if n, err := leased.ReturnLeases(ctx, 0); err != nil || n != 9 {
		t.Fatalf("ReturnLeases = %d, %v; want the 9 units the lease did not use", n, err)
	}
	if c, after := count(key), rdb.PTTL(ctx, key).Val(); c != "1" || after > ttl || after < ttl-time.Minute {
		t.Fatalf("after the return: counter %q, PTTL %s (was %s); want 1 and the window's own end", c, after, ttl)
	}
	if n, err := leased.ReturnLeases(ctx, 0); err != nil || n != 0 {
		t.Fatalf("a second ReturnLeases = %d, %v; want 0 (nothing left to give back)", n, err)
	}
	// Another process admits what came back: the Rate in all, not a unit more.
	if r, err := direct.AllowN(ctx, "s", 99, l); err != nil || !r.Allowed || r.Remaining != 0 {
		t.Fatalf("AllowN(99) after the return = %+v, %v; want admitted, 0 remaining", r, err)
	}
	for _, lim := range []*limiter.Limiter{direct, leased} {
		if r, err := lim.Allow(ctx, "s", l); err != nil || r.Allowed {
			t.Fatalf("call past 1 + 99 admitted of 100 = %+v, %v; want denied", r, err)
		}
	}

	// A window deleted and counted anew gets nothing back (told apart from
	// the lease's by its time left, once the two began more than the
	// lease's round trip apart).
	key2, _ := limiter.Key("t", "s2", l)
	if r, err := leased.Allow(ctx, "s2", l); err != nil || !r.Allowed || !r.Leased {
		t.Fatalf("s2: %+v, %v; want a lease", r, err)
	}
	rdb.Del(ctx, key2)
	advance(500 * time.Millisecond)
	if err := rdb.Set(ctx, key2, 50, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := leased.ReturnLeases(ctx, 0); err != nil || n != 0 || count(key2) != "50" {
		t.Fatalf("return to a window counted anew = %d, %v, counter %q; want 0 returned, the new window's 50 untouched", n, err, count(key2))
	}

	// The script's own guards: the end names the window; the count must
	// hold the units; a key of another type is refused.
	key3, _ := limiter.Key("t", "s3", l)
	if r, err := direct.AllowN(ctx, "s3", 3, l); err != nil || !r.Allowed {
		t.Fatalf("s3: %+v, %v", r, err)
	}
	at := func(key string, units int64) limiter.Request {
		return limiter.Request{Keys: []string{key}, Limits: []limiter.Limit{l}, Cost: units}
	}
	end, left, err := fw.WindowEnd(ctx, st, at(key3, 0))
	if err != nil || end <= 0 || left <= 59*time.Minute || left > time.Hour {
		t.Fatalf("WindowEnd = %d, %s, %v; want the window's end, about 1h left", end, left, err)
	}
	for _, tc := range []struct {
		units, end int64
		why        string
	}{{1, end + 3, "another window's end"}, {1, end - 3, "another window's end"}, {4, end, "more units than counted"}} {
		if ok, err := fw.ReturnQuota(ctx, st, at(key3, tc.units), tc.end); err != nil || ok || count(key3) != "3" {
			t.Errorf("ReturnQuota with %s = %v, %v, counter %q; want refused, 3", tc.why, ok, err, count(key3))
		}
	}
	if ok, err := fw.ReturnQuota(ctx, st, at(key3, 2), end); err != nil || !ok || count(key3) != "1" {
		t.Errorf("ReturnQuota(2) = %v, %v, counter %q; want given back, 1", ok, err, count(key3))
	}
	rdb.Del(ctx, key3)
	rdb.HSet(ctx, key3, "count", 3)
	rdb.PExpireAt(ctx, key3, time.UnixMilli(end))
	if ok, err := fw.ReturnQuota(ctx, st, at(key3, 1), end); !errors.Is(err, limiter.ErrCorruptCounter) || ok {
		t.Errorf("ReturnQuota to a hash = %v, %v; want ErrCorruptCounter", ok, err)
	}
	if v := rdb.HGet(ctx, key3, "count").Val(); v != "3" {
		t.Errorf("hash field after a refused return = %q, want 3", v)
	}
	if end, left, err := fw.WindowEnd(ctx, st, at("t:{none}:x", 0)); err != nil || end != 0 || left != 0 {
		t.Errorf("WindowEnd of no key = %d, %s, %v; want 0", end, left, err)
	}
}

// TestBucketedReturnsLeases: Bucketed gives a quota lease's unused units
// back to the window they were counted in (named by the key's index), and
// another process admits them, exactly the Rate in all, with the key's
// expiry unchanged; a return named for an ended window, or for more than
// the window counts, or to a deleted counter, writes nothing; a corrupt
// counter is limiter.ErrCorruptCounter. On miniredis and a redis-server.
func TestBucketedReturnsLeases(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) (*redis.Client, func(time.Duration)){
		"miniredis": func(t *testing.T) (*redis.Client, func(time.Duration)) {
			m, _ := newMini(t)
			rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
			t.Cleanup(func() { _ = rdb.Close() })
			return rdb, m.Advance
		},
		"redis-server": func(t *testing.T) (*redis.Client, func(time.Duration)) { return realServer(t), time.Sleep },
	} {
		t.Run(name, func(t *testing.T) {
			rdb, advance := open(t)
			testBucketedReturns(t, rdb, goredis.New(rdb), advance)
		})
	}
}

func testBucketedReturns(t *testing.T, rdb *redis.Client, st store.Store, advance func(time.Duration)) {
	ctx := context.Background()
	l := limiter.PerHour(100)
	p := l.Period.Milliseconds()
	// Keep 30 s away from the end of the hour: every call below falls in
	// one window.
	if left := p - rdb.Time(ctx).Val().UnixMilli()%p; left < 30_000 {
		advance(time.Duration(left+10) * time.Millisecond)
	}
	b := strategy.NewBucketed()
	leased, err := limiter.New(st, b, limiter.WithPrefix("t"), limiter.WithQuotaLease(10))
	if err != nil {
		t.Fatal(err)
	}
	direct := newLim(t, st, b)
	base, _ := limiter.Key("t", "s", l)
	idx := rdb.Time(ctx).Val().UnixMilli() / p
	key := fmt.Sprintf("%s:%d", base, idx)
	count := func() string { t.Helper(); return rdb.Get(ctx, key).Val() }

	if r, err := leased.Allow(ctx, "s", l); err != nil || !r.Allowed || !r.Leased {
		t.Fatalf("first call: %+v, %v; want admitted from a lease", r, err)
	}
	if c := count(); c != "10" {
		t.Fatalf("counter %s = %q after a lease of 10, want 10", key, c)
	}
	exp := rdb.PExpireTime(ctx, key).Val()
	if n, err := leased.ReturnLeases(ctx, 0); err != nil || n != 9 {
		t.Fatalf("ReturnLeases = %d, %v; want the 9 units the lease did not use", n, err)
	}
	if c, after := count(), rdb.PExpireTime(ctx, key).Val(); c != "1" || after != exp {
		t.Fatalf("after the return: counter %q, expiry %s (was %s); want 1 and the same expiry", c, after, exp)
	}
	if r, err := direct.AllowN(ctx, "s", 99, l); err != nil || !r.Allowed || r.Remaining != 0 {
		t.Fatalf("AllowN(99) after the return = %+v, %v; want admitted, 0 remaining", r, err)
	}
	for _, lim := range []*limiter.Limiter{direct, leased} {
		if r, err := lim.Allow(ctx, "s", l); err != nil || r.Allowed {
			t.Fatalf("call past 1 + 99 admitted of 100 = %+v, %v; want denied", r, err)
		}
	}

	req := func(units int64) limiter.Request {
		return limiter.Request{Keys: []string{base}, Limits: []limiter.Limit{l}, Cost: units}
	}
	end, left, err := b.WindowEnd(ctx, st, req(0))
	if err != nil || end != (idx+1)*p || left <= 0 || left > l.Period {
		t.Fatalf("WindowEnd = %d, %s, %v; want %d and (0, 1h] left", end, left, err, (idx+1)*p)
	}
	for _, c := range []struct {
		units, end int64
		what       string
	}{
		{3, end - p, "named for the window before"},
		{3, end + 1, "named for no window's end"},
		{101, end, "of more than the window counts"},
	} {
		if ok, err := b.ReturnQuota(ctx, st, req(c.units), c.end); err != nil || ok || count() != "100" {
			t.Errorf("a return %s = %v, %v, counter %q; want refused, 100", c.what, ok, err, count())
		}
	}
	if ok, err := b.ReturnQuota(ctx, st, req(5), end); err != nil || !ok || count() != "95" {
		t.Errorf("5 units returned = %v, %v, counter %q; want given back, 95", ok, err, count())
	}
	rdb.Del(ctx, key)
	if ok, err := b.ReturnQuota(ctx, st, req(5), end); err != nil || ok || rdb.Exists(ctx, key).Val() != 0 {
		t.Errorf("a return to a deleted counter = %v, %v, exists %d; want refused, no key", ok, err, rdb.Exists(ctx, key).Val())
	}
	if end, _, err := b.WindowEnd(ctx, st, req(0)); err != nil || end != 0 {
		t.Errorf("WindowEnd of a deleted counter = %d, %v; want 0", end, err)
	}
	rdb.Set(ctx, key, "x", time.Minute)
	if ok, err := b.ReturnQuota(ctx, st, req(5), end); ok || !errors.Is(err, limiter.ErrCorruptCounter) {
		t.Errorf("a return to a corrupt counter = %v, %v; want ErrCorruptCounter", ok, err)
	}
}

// contended is a store whose WATCH transactions see a write to the watched
// key between their reads and EXEC, as when another process counts on it,
// the first n times.
type contended struct {
	*goredis.Store
	rdb *redis.Client
	n   int
}

func (c *contended) Watch(ctx context.Context, keys []string, fn func(store.Tx) error) error {
	return c.Store.Watch(ctx, keys, func(tx store.Tx) error {
		return fn(&contendedTx{Tx: tx, c: c, key: keys[0]})
	})
}

type contendedTx struct {
	store.Tx
	c   *contended
	key string
}

func (t *contendedTx) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	rs, err := t.Tx.Do(ctx, cmds...)
	if t.c.n > 0 {
		t.c.n--
		// the same value, the same TTL: only the write is seen
		v := t.c.rdb.Get(ctx, t.key).Val()
		t.c.rdb.Set(ctx, t.key, v, redis.KeepTTL)
	}
	return rs, err
}

// TestReturnRetriesContention: a quota return without Lua (Bucketed,
// Optimistic) whose transaction a write to the counter aborts is tried
// again, up to 3 times in all, and takes its units off once; after 3
// aborted tries it reports false and leaves the counter as it was.
func TestReturnRetriesContention(t *testing.T) {
	ctx := context.Background()
	rdb := realServer(t)
	l := limiter.PerHour(100)
	p := l.Period.Milliseconds()
	if left := p - rdb.Time(ctx).Val().UnixMilli()%p; left < 30_000 {
		time.Sleep(time.Duration(left+10) * time.Millisecond)
	}
	for _, s := range []limiter.QuotaReturner{strategy.NewBucketed(), strategy.NewOptimistic()} {
		for aborts, want := range map[int]string{2: "7", 3: "10"} {
			rdb.FlushAll(ctx)
			st := &contended{Store: goredis.New(rdb), rdb: rdb}
			if r, err := newLim(t, st, s).AllowN(ctx, "s", 10, l); err != nil || !r.Allowed {
				t.Fatalf("%T: AllowN(10) = %+v, %v", s, r, err)
			}
			base, _ := limiter.Key("t", "s", l)
			req := limiter.Request{Keys: []string{base}, Limits: []limiter.Limit{l}}
			end, _, err := s.WindowEnd(ctx, st, req)
			if err != nil || end <= 0 {
				t.Fatalf("%T: WindowEnd = %d, %v", s, end, err)
			}
			st.n = aborts
			req.Cost = 3
			ok, err := s.ReturnQuota(ctx, st, req, end)
			keys := rdb.Keys(ctx, base+"*").Val()
			if len(keys) != 1 {
				t.Fatalf("%T: keys %q", s, keys)
			}
			if got := rdb.Get(ctx, keys[0]).Val(); err != nil || ok != (want == "7") || got != want || st.n != 0 {
				t.Errorf("%T: a return of 3 aborted %d times = %v, %v, counter %q (%d aborts left); want %v, %s", s, aborts, ok, err, got, st.n, want == "7", want)
			}
		}
	}
}
