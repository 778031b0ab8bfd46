package limiter

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// windowCounter is a fixed window counter on miniredis for the lease's own
// tests, without the strategy package (which imports this one): INCRBY,
// PEXPIRE when new, PTTL, taken back when over.
type windowCounter struct{}

var windowScript = store.NewScript(`
local c = redis.call('INCRBY', KEYS[1], ARGV[1])
if c == tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
local ttl = redis.call('PTTL', KEYS[1])
if c > tonumber(ARGV[2]) then
  redis.call('DECRBY', KEYS[1], ARGV[1])
  return {0, tonumber(ARGV[2]) - c + tonumber(ARGV[1]), ttl}
end
return {1, tonumber(ARGV[2]) - c, ttl}`)

func (windowCounter) Decide(ctx context.Context, st store.Store, req Request) (Result, error) {
	l := req.Limits[0]
	nums, err := windowScript.RunInt64s(ctx, st, req.Keys, []int64{req.Cost, l.Rate, l.Period.Milliseconds()}, nil)
	if err != nil {
		return Result{}, err
	}
	var b Binder
	retry := time.Duration(0)
	if nums[0] == 0 {
		retry = time.Duration(nums[2]) * time.Millisecond
	}
	b.Add(0, nums[1], time.Duration(nums[2])*time.Millisecond, retry)
	return b.Result(nums[0] == 1), nil
}

func (windowCounter) WindowQuota() {}

// clockedMini returns a store on miniredis and a clock for the lease table
// that advance moves together with the server's.
func clockedMini(t *testing.T) (*redistest.Mini, store.Store, func() time.Time, func(time.Duration)) {
	m := redistest.NewMini(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	var mu sync.Mutex
	local := time.Unix(1_000_000, 0)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return local }
	advance := func(d time.Duration) {
		mu.Lock()
		local = local.Add(d)
		mu.Unlock()
		m.Advance(d)
	}
	return m, goredis.New(rdb), now, advance
}

// TestQuotaLeaseEndsWithItsWindow moves the server's clock and the lease
// table's together: units leased in a window are never admitted after it
// ends, even one millisecond after, and the next call takes a lease in the
// new window; a lease's end is measured from before its request was sent.
func TestQuotaLeaseEndsWithItsWindow(t *testing.T) {
	m, st, now, advance := clockedMini(t)
	lim, err := New(st, windowCounter{}, WithQuotaLease(10))
	if err != nil {
		t.Fatal(err)
	}
	lim.leases.now = now
	ctx := context.Background()
	l := PerSecond(100)
	key, _ := Key(DefaultPrefix, "s", l)
	r, err := lim.Allow(ctx, "s", l)
	if err != nil || !r.Allowed || !r.Leased || r.ResetAfter != time.Second {
		t.Fatalf("first call: %+v, %v; want a lease, the window's reset 1s from now", r, err)
	}
	advance(time.Second - leaseMargin - time.Millisecond)
	if r, err := lim.Allow(ctx, "s", l); err != nil || !r.Allowed || !r.Leased || r.ResetAfter != time.Millisecond {
		t.Fatalf("1 ms before the lease ends: %+v, %v; want admitted from the lease", r, err)
	}
	advance(time.Millisecond)
	// The lease has ended (the window ends leaseMargin later): the next
	// call takes a new lease, in Redis.
	if r, err := lim.Allow(ctx, "s", l); err != nil || !r.Allowed || r.Remaining != 100-20+9 {
		t.Fatalf("at the lease's end: %+v, %v", r, err)
	}
	if v, _ := m.Get(key); v != "20" {
		t.Errorf("counter %q, want 20: the second lease counted in the first window (which has %s left)", v, m.TTL(key))
	}
	advance(leaseMargin)
	// The window ended: the second lease (taken 1 ms before its end) has
	// ended too, and a third one is taken in the new window.
	if r, err := lim.Allow(ctx, "s", l); err != nil || !r.Allowed || !r.Leased || r.Remaining != 99 {
		t.Fatalf("in the new window: %+v, %v; want a new lease, 99 remaining", r, err)
	}
	if v, _ := m.Get(key); v != "10" {
		t.Errorf("counter %q in the new window, want 10", v)
	}
}

// returnCounter is windowCounter that gives units back: WindowEnd reads
// PEXPIRETIME and PTTL, ReturnQuota DECRBYs when the window's end is the
// one named; calls counts the calls of both.
type returnCounter struct {
	windowCounter
	calls atomic.Int64
}

func (r *returnCounter) WindowEnd(ctx context.Context, st store.Store, req Request) (int64, time.Duration, error) {
	r.calls.Add(1)
	key := req.Keys[0]
	rs, err := st.Do(ctx, store.Cmd{Name: "PEXPIRETIME", Args: []any{key}}, store.Cmd{Name: "PTTL", Args: []any{key}})
	if err != nil {
		return 0, 0, err
	}
	end, _ := store.Int64(rs[0].Val)
	left, _ := store.Int64(rs[1].Val)
	return end, time.Duration(left) * time.Millisecond, nil
}

func (r *returnCounter) ReturnQuota(ctx context.Context, st store.Store, req Request, end int64) (bool, error) {
	r.calls.Add(1)
	key, units := req.Keys[0], req.Cost
	rs, err := st.Do(ctx, store.Cmd{Name: "PEXPIRETIME", Args: []any{key}})
	if err != nil {
		return false, err
	}
	if e, _ := store.Int64(rs[0].Val); e != end {
		return false, nil
	}
	_, err = st.Do(ctx, store.Cmd{Name: "DECRBY", Args: []any{key, units}})
	return err == nil, err
}

// TestReturnLeasesChoosesLeases: ReturnLeases gives back only leases idle
// for the time asked, whose window is open in this process, and whose
// window is long enough beside the round trips to be told apart from the
// next; a Limiter without leases, or whose strategy gives nothing back,
// returns 0. The lease table's clock and the server's move together.
func TestReturnLeasesChoosesLeases(t *testing.T) {
	m, st, now, advance := clockedMini(t)
	rc := &returnCounter{}
	lim, err := New(st, rc, WithQuotaLease(10))
	if err != nil {
		t.Fatal(err)
	}
	lim.leases.now = now
	ctx := context.Background()
	get := func(subject string, l Limit) string {
		t.Helper()
		key, _ := Key(DefaultPrefix, subject, l)
		v, _ := m.Get(key)
		return v
	}

	hourly := PerHour(100)
	if r, err := lim.Allow(ctx, "idle", hourly); err != nil || !r.Leased {
		t.Fatalf("first call: %+v, %v; want a lease", r, err)
	}
	if n, err := lim.ReturnLeases(ctx, time.Minute); err != nil || n != 0 || rc.calls.Load() != 0 {
		t.Fatalf("ReturnLeases(1m) of a lease used just now = %d, %v (%d calls sent); want 0, none sent", n, err, rc.calls.Load())
	}
	advance(time.Minute)
	if n, err := lim.ReturnLeases(ctx, time.Minute); err != nil || n != 9 || get("idle", hourly) != "1" {
		t.Fatalf("ReturnLeases(1m) a minute later = %d, %v, counter %q; want 9, 1", n, err, get("idle", hourly))
	}

	// A window of 3 ms: shorter than twice the round trips and margins
	// that tell it apart from the next, so its units stay where they are.
	short := Per(20, 3*time.Millisecond)
	if r, err := lim.Allow(ctx, "short", short); err != nil || !r.Leased {
		t.Fatalf("short window: %+v, %v; want a lease", r, err)
	}
	if n, err := lim.ReturnLeases(ctx, 0); err != nil || n != 0 || get("short", short) != "10" {
		t.Fatalf("ReturnLeases with a 3 ms window = %d, %v, counter %q; want 0, 10", n, err, get("short", short))
	}

	// A lease whose window ended is not even tried.
	second := PerSecond(100)
	if r, err := lim.Allow(ctx, "ended", second); err != nil || !r.Leased {
		t.Fatalf("1/s window: %+v, %v; want a lease", r, err)
	}
	advance(time.Second)
	sent := rc.calls.Load()
	if n, err := lim.ReturnLeases(ctx, 0); err != nil || n != 0 || rc.calls.Load() != sent {
		t.Fatalf("ReturnLeases after the window ended = %d, %v (%d calls sent); want 0, none sent", n, err, rc.calls.Load()-sent)
	}

	for name, opts := range map[string][]Option{"a strategy that gives nothing back": {WithQuotaLease(10)}, "no leases": nil} {
		var s Strategy = windowCounter{}
		if opts == nil {
			s = rc
		}
		other, err := New(st, s, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Allow(ctx, "other", hourly); err != nil {
			t.Fatal(err)
		}
		if n, err := other.ReturnLeases(ctx, 0); err != nil || n != 0 || get("other", hourly) == "" {
			t.Errorf("%s: ReturnLeases = %d, %v; want 0", name, n, err)
		}
	}
}
