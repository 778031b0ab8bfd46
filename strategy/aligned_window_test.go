package strategy_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// commandCalls reads INFO commandstats: calls per command since the last
// CONFIG RESETSTAT.
func commandCalls(t *testing.T, rdb *redis.Client) map[string]int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("%q: %v", line, err)
				}
				out[strings.TrimPrefix(name, "cmdstat_")] = n
			}
		}
	}
	return out
}

// TestAlignedWindowOneDecr proves the design on a redis-server: in one
// window, the first decision reads TIME, sets the counter (INCRBY of 2^52
// onto what its DECR left) and its expiry, and every later one is a
// single DECR (DECRBY for a cost above 1); a denial gives its cost back.
func TestAlignedWindowOneDecr(t *testing.T) {
	rdb := realServer(t)
	ctx := context.Background()
	lim := newLim(t, goredis.New(rdb), strategy.NewAlignedWindow())
	l := limiter.PerHour(10)
	// Away from the window's end, so that all calls fall in one window.
	if _, err := lim.Allow(ctx, "warm", l); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		r, err := lim.Allow(ctx, "one", l)
		if err != nil {
			t.Fatal(err)
		}
		if want := i < 10; r.Allowed != want || (want && r.Remaining != int64(9-i)) {
			t.Fatalf("call %d: %+v; want allowed=%v with %d remaining", i+1, r, want, 9-i)
		}
		if !r.Allowed && (r.RetryAfter <= 0 || r.RetryAfter > time.Hour || r.RetryAfter != r.ResetAfter) {
			t.Fatalf("call %d: denied with RetryAfter %s, ResetAfter %s; want both the time to the window's end", i+1, r.RetryAfter, r.ResetAfter)
		}
	}
	calls := commandCalls(t, rdb)
	want := map[string]int64{"evalsha": 12, "decr": 12, "decrby": 0, "incrby": 1 + 2, "time": 1, "pexpireat": 1, "pttl": 2}
	for name, n := range want {
		if calls[name] != n {
			t.Errorf("%s called %d times, want %d (all: %v)", name, calls[name], n, calls)
		}
	}
	keys, err := rdb.Keys(ctx, "t:{one}:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys %q, %v; want one", keys, err)
	}
	idx, err := strconv.ParseInt(keys[0][strings.LastIndexByte(keys[0], ':')+1:], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := rdb.PExpireTime(ctx, keys[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	if end := (idx + 1) * time.Hour.Milliseconds(); exp != time.Duration(end)*time.Millisecond {
		t.Errorf("key %s expires at %d ms, want its window's end %d ms", keys[0], exp.Milliseconds(), end)
	}
	if v, err := rdb.Get(ctx, keys[0]).Int64(); err != nil || v != strategy.AlignedCountBase-10 {
		t.Errorf("counter %d, %v; want 2^52 - 10 (10 counted)", v, err)
	}
	if want := fmt.Sprintf("t:{one}:3600000ms:3600000:%d", idx); keys[0] != want {
		t.Errorf("key %s, want %s (the period and the window's index end it)", keys[0], want)
	}

	// A cost above 1 on a counter that exists: one DECRBY.
	if _, err := lim.AllowN(ctx, "warm", 3, l); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if r, err := lim.AllowN(ctx, "warm", 3, l); err != nil || !r.Allowed || r.Remaining != 10-1-3-3 {
		t.Fatalf("AllowN(3) = %+v, %v; want admitted with %d remaining", r, err, 10-1-3-3)
	}
	calls = commandCalls(t, rdb)
	for name, n := range map[string]int64{"evalsha": 1, "decrby": 1, "decr": 0, "incrby": 0, "time": 0, "pttl": 0} {
		if calls[name] != n {
			t.Errorf("cost 3: %s called %d times, want %d (all: %v)", name, calls[name], n, calls)
		}
	}
}

// TestAlignedWindowSkewedAppClock: an app clock minutes off the server's
// names windows the server's clock is not in; the decision is counted in
// the server's window, in as many round trips as it takes to learn the
// offset, and every later decision names the right window at once.
func TestAlignedWindowSkewedAppClock(t *testing.T) {
	rdb := realServer(t)
	ctx := context.Background()
	for _, skew := range []time.Duration{-7 * time.Minute, 7 * time.Minute} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			// The first TIME sample is right; then the app clock jumps.
			var jumped bool
			now := func() time.Time {
				if jumped {
					return time.Now().Add(skew)
				}
				return time.Now()
			}
			lim := newLim(t, goredis.New(rdb), strategy.NewAlignedWindow(strategy.WithAlignedClock(now)))
			l := limiter.PerMinute(3)
			subject := "skew" + skew.String()
			if _, err := lim.Peek(ctx, subject, l); err != nil {
				t.Fatal(err)
			}
			jumped = true
			for i := range 4 {
				r, err := lim.Allow(ctx, subject, l)
				if err != nil {
					t.Fatal(err)
				}
				if want := i < 3; r.Allowed != want || r.ResetAfter > time.Minute {
					t.Fatalf("call %d: %+v; want allowed=%v, reset within a minute", i+1, r, want)
				}
			}
			srv, err := rdb.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			keys, err := rdb.Keys(ctx, "t:{"+subject+"}:*").Result()
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("t:{%s}:60000ms:60000:%d", subject, srv.UnixMilli()/60000)
			if len(keys) != 1 || keys[0] != want {
				// A window's end between the calls and TIME moves the index by one.
				if len(keys) != 1 || !strings.HasPrefix(keys[0], fmt.Sprintf("t:{%s}:60000ms:60000:%d", subject, srv.UnixMilli()/60000-1)) {
					t.Fatalf("keys %q; want [%s] (the server's window, not the app clock's)", keys, want)
				}
			}
		})
	}
}

// alignedKey is the name of the counter of subject's limit l in the
// window now is in, as AlignedWindow names it (a Limiter's prefix "t").
func alignedKey(t *testing.T, subject string, l limiter.Limit, now time.Time) string {
	t.Helper()
	k, err := limiter.Key("t", subject, l)
	if err != nil {
		t.Fatal(err)
	}
	p := l.Period.Milliseconds()
	return k + ":" + strconv.FormatInt(p, 10) + ":" + strconv.FormatInt(now.UnixMilli()/p, 10)
}

// movingServer advances a miniredis clock by a step before every script
// it runs: a server whose clock always names a later window than the last
// reply did, as when a round trip is as long as a window.
type movingServer struct {
	store.Store
	m    *redistest.Mini
	step time.Duration
}

func (s movingServer) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	s.m.Advance(s.step)
	return s.Store.EvalSha(ctx, sha, keys, args)
}

func (s movingServer) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	s.m.Advance(s.step)
	return s.Store.Eval(ctx, src, keys, args)
}

// TestAlignedWindowStale: a server whose clock is never in the window the
// decision was sent for is denied with ErrStaleWindow as the Cause, after
// 4 round trips, and counts nothing.
func TestAlignedWindowStale(t *testing.T) {
	m, st := newMini(t)
	ctx := context.Background()
	mv := movingServer{Store: st, m: m, step: time.Minute}
	lim := newLim(t, mv, strategy.NewAlignedWindow())
	r, err := lim.Allow(ctx, "stale", limiter.PerMinute(5))
	if err != nil {
		t.Fatal(err)
	}
	if r.Allowed || !errors.Is(r.Cause, strategy.ErrStaleWindow) || r.RetryAfter <= 0 || r.RetryAfter > time.Minute {
		t.Fatalf("%+v; want denied until the window's end with ErrStaleWindow", r)
	}
	if keys := m.Keys(); len(keys) != 0 {
		t.Fatalf("keys %q after a stale decision; want none", keys)
	}
	// A server that keeps still: admitted in one round trip.
	r, err = newLim(t, st, strategy.NewAlignedWindow(strategy.WithAlignedClock(m.Now))).Allow(ctx, "still", limiter.PerMinute(5))
	if err != nil || !r.Allowed || r.Remaining != 4 {
		t.Fatalf("%+v, %v; want admitted with 4 remaining", r, err)
	}
}

// TestAlignedWindowConcurrent: decisions at once on many subjects, each
// with its own count (run with -race: the pooled buffers must never be
// shared by two decisions).
func TestAlignedWindowConcurrent(t *testing.T) {
	_, st := newMini(t)
	lim := newLim(t, st, strategy.NewAlignedWindow())
	l := limiter.PerHour(20)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			subject := fmt.Sprint("c", w)
			for i := range 25 {
				r, err := lim.Allow(context.Background(), subject, l)
				if err == nil && (r.Allowed != (i < 20) || r.Allowed && r.Remaining != int64(19-i) || r.Limit != l) {
					err = fmt.Errorf("%s call %d: %+v", subject, i+1, r)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestAlignedWindowPeekCorrupt: a read (Peek) refuses what a counting call
// refuses: a leading zero, a counter above 2^52 (a count below zero),
// a number beyond 2^53 - 1. It used to read them as "nothing used". On a
// redis-server, whose DECRBY refuses a leading zero (miniredis's takes it).
func TestAlignedWindowPeekCorrupt(t *testing.T) {
	rdb := realServer(t)
	ctx := context.Background()
	lim := newLim(t, goredis.New(rdb), strategy.NewAlignedWindow())
	l := limiter.PerHour(5)
	for _, bad := range []string{"007", strconv.FormatInt(strategy.AlignedCountBase+40, 10), "99999999999999999999"} {
		subject := "pc" + bad
		srv, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		key := alignedKey(t, subject, l, srv)
		if err := rdb.Set(ctx, key, bad, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := lim.Allow(ctx, subject, l); !errors.Is(err, limiter.ErrCorruptCounter) {
			t.Fatalf("counter %q: Allow = %v; want ErrCorruptCounter", bad, err)
		}
		if err := rdb.Set(ctx, key, bad, time.Hour).Err(); err != nil { // as it was
			t.Fatal(err)
		}
		if r, err := lim.Peek(ctx, subject, l); !errors.Is(err, limiter.ErrCorruptCounter) {
			t.Errorf("counter %q: Peek = %+v, %v; want ErrCorruptCounter, as Allow", bad, r, err)
		}
	}
}

// TestAlignedWindowScriptRefusesKeysWithoutWindow: the script reads a
// window's bounds from its key; a key that does not end in
// ":period:index", or arguments that do not match the keys, are an error
// and leave nothing behind (no counter without a TTL), on miniredis and on
// a redis-server.
func TestAlignedWindowScriptRefusesKeysWithoutWindow(t *testing.T) {
	ctx := context.Background()
	m := redistest.NewMini(t)
	mini := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = mini.Close() })
	for name, rdb := range map[string]*redis.Client{"miniredis": mini, "redis-server": realServer(t)} {
		t.Run(name, func(t *testing.T) {
			src := strategy.AlignedWindowScript().Source()
			for _, c := range []struct {
				keys []string
				args []any
				want string
			}{
				{[]string{"x:{a}:5"}, []any{10}, "does not end in :period:index"},
				{[]string{"x:{a}:0:5"}, []any{2, 10}, "does not end in :period:index"},
				{[]string{"x:{a}:1000:5", "x:{a}:zz"}, []any{10, 10}, "does not end in :period:index"},
				{[]string{"x:{a}:1000:5", "x:{a}:1000:zz"}, []any{3, 10, 10}, "does not end in :period:index"},
				{[]string{"x:{a}:1000:5"}, []any{1, 10, 1000}, "3 arguments for 1 keys"},
				{[]string{"x:{a}:1000:5", "x:{a}:60000:0"}, []any{10}, "1 arguments for 2 keys"},
			} {
				err := rdb.Eval(ctx, src, c.keys, c.args...).Err()
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("keys %q args %v: %v; want an error saying %q", c.keys, c.args, err, c.want)
				}
				if n, err := rdb.Exists(ctx, c.keys...).Result(); err != nil || n != 0 {
					t.Errorf("keys %q args %v: %d keys left, %v; want none", c.keys, c.args, n, err)
				}
			}
		})
	}
}
