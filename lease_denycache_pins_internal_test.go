package limiter

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/quotagate/limiter/store"
)

// noStore stands for a Redis that scriptedQuota never calls.
type noStore struct{ store.Store }

// scriptedQuota is a WindowQuota and QuotaReturner whose decisions the
// test scripts.
type scriptedQuota struct {
	mu      sync.Mutex
	decide  func(req Request) (Result, error)
	costs   []int64
	end     int64
	left    time.Duration
	returns []int64
}

func (f *scriptedQuota) Decide(ctx context.Context, st store.Store, req Request) (Result, error) {
	f.mu.Lock()
	f.costs = append(f.costs, req.Cost)
	d := f.decide
	f.mu.Unlock()
	return d(req)
}
func (*scriptedQuota) WindowQuota() {}

// Reset deletes nothing: there is no Redis behind the script.
func (*scriptedQuota) Reset(context.Context, store.Store, []string) error { return nil }
func (f *scriptedQuota) WindowEnd(ctx context.Context, st store.Store, req Request) (int64, time.Duration, error) {
	return f.end, f.left, nil
}
func (f *scriptedQuota) ReturnQuota(ctx context.Context, st store.Store, req Request, end int64) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.returns = append(f.returns, req.Cost)
	return true, nil
}
func (f *scriptedQuota) calls() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.costs...)
}

type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func newScriptedLim(t *testing.T, f *scriptedQuota, c *stepClock, opts ...Option) *Limiter {
	t.Helper()
	l, err := New(noStore{}, f, append([]Option{WithClock(c.now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func admit(reset time.Duration) func(Request) (Result, error) {
	return func(req Request) (Result, error) {
		return Result{Allowed: true, Remaining: 0, ResetAfter: reset}, nil
	}
}

// A limit whose Rate equals the lease's units is leased: only a rate below
// the units sends every call to Redis.
func TestLeaseAtRateEqualToUnits(t *testing.T) {
	c := &stepClock{t: time.Unix(1_000_000, 0)}
	f := &scriptedQuota{decide: admit(time.Second)}
	lim := newScriptedLim(t, f, c, WithQuotaLease(4))
	ctx := context.Background()
	l := PerSecond(4)
	if r, err := lim.Allow(ctx, "s", l); err != nil || !r.Allowed {
		t.Fatalf("first call = %+v, %v", r, err)
	}
	if r, _ := lim.Allow(ctx, "s", l); !r.Leased {
		t.Fatalf("rate == units: second call %+v not leased (calls %v)", r, f.calls())
	}
}

// A cached denial's RetryAfter and ResetAfter count down to the instants
// Redis gave, also when the entry is kept for less (MaxTransientCached).
func TestDenyCacheCountsDownToRedisInstants(t *testing.T) {
	c := newDenyCache(4)
	c.most = MaxTransientCached
	now := time.Unix(1_000_000, 0)
	c.now = func() time.Time { return now }
	l := []Limit{PerMinute(1)}
	c.remember("p", "s", 1, l, Result{RetryAfter: time.Second, ResetAfter: time.Minute}, now, new(giveBacks), 0)
	now = now.Add(50 * time.Millisecond)
	r, ok := c.lookup("p", "s", 1, l)
	if !ok || r.RetryAfter != 950*time.Millisecond || r.ResetAfter != time.Minute-50*time.Millisecond {
		t.Fatalf("lookup = %+v, %v; want RetryAfter 950ms, ResetAfter 59.95s", r, ok)
	}
	now = now.Add(50 * time.Millisecond)
	if _, ok := c.lookup("p", "s", 1, l); ok {
		t.Fatal("kept past MaxTransientCached")
	}
}

// forget (a Reset) drops the subject's denials under its own prefix only,
// and their index entries with them.
func TestDenyCacheForgetsOnlyItsPrefix(t *testing.T) {
	c := newDenyCache(4)
	now := time.Unix(1_000_000, 0)
	c.now = func() time.Time { return now }
	l := []Limit{PerMinute(1)}
	d := Result{RetryAfter: time.Minute, ResetAfter: time.Minute}
	c.remember("p", "s", 1, l, d, now, new(giveBacks), 0)
	c.remember("q", "s", 1, l, d, now, new(giveBacks), 0)
	c.forget("p", "s")
	if _, ok := c.lookup("q", "s", 1, l); !ok {
		t.Error("forget of prefix p dropped prefix q's denial")
	}
	if n := c.len(); n != 1 {
		t.Errorf("%d entries after forget, want 1", n)
	}
}

// A lease taken while a Reset of its subject ran admits only its own call:
// the next one goes to Redis.
func TestLeaseTakenDuringResetAdmitsOnlyItsCall(t *testing.T) {
	c := &stepClock{t: time.Unix(1_000_000, 0)}
	f := &scriptedQuota{}
	var lim *Limiter
	l := PerSecond(100)
	ctx := context.Background()
	f.decide = func(req Request) (Result, error) {
		if req.Cost == 10 {
			if err := lim.Reset(ctx, "s", l); err != nil { // runs while the lease's call is on its way
				t.Error(err)
			}
		}
		return Result{Allowed: true, ResetAfter: time.Second}, nil
	}
	lim = newScriptedLim(t, f, c, WithQuotaLease(10))
	if r, err := lim.Allow(ctx, "s", l); err != nil || !r.Allowed {
		t.Fatal(r, err)
	}
	n := len(f.calls())
	if r, _ := lim.Allow(ctx, "s", l); r.Leased || len(f.calls()) == n {
		t.Fatalf("a lease taken while Reset ran admitted another call: %+v", r)
	}
}
