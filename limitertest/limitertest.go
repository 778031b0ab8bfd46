package limitertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/derive"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// Clock is the embedded server's clock: Redis TIME and key expiry move
// together, and only through Advance. It starts at the current second of
// the wall clock.
type Clock struct {
	m  *miniredis.Miniredis
	mu sync.Mutex
	t  time.Time
}

// Now returns the server's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the server's clock forward by d (keys whose TTL ends
// expire). It is safe for concurrent use.
func (c *Clock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	c.m.SetTime(c.t)
	c.m.FastForward(d)
}

// Server returns the embedded server, to inspect keys (Keys, TTL, Get).
func (c *Clock) Server() *miniredis.Miniredis { return c.m }

// New returns a Limiter deciding with s on a fresh embedded Redis, and the
// server's clock. opts apply after the defaults (a prefix of "limiter",
// Wait sleeping on the clock, the deny cache and quota leases on the clock
// too: limiter.WithClock). A strategy of package strategy that reads the
// app's clock (AlignedWindow, Bucketed) reads the server's too (of the
// last New it was given to), unless it was built with a clock of its own
// (strategy.WithAlignedClock, strategy.WithClock) or has decided before. The server and its client close when t
// ends; New fails t if the server cannot start.
func New(t testing.TB, s limiter.Strategy, opts ...limiter.Option) (*limiter.Limiter, *Clock) {
	t.Helper()
	st, clock := Store(t)
	if cu, ok := s.(derive.ClockUser); ok {
		// a strategy that names windows from the app's clock reads the
		// server's, unless it was given a clock of its own
		cu.UseClock(derive.Token{}, clock.Now)
	}
	sleep := limiter.WithSleep(func(ctx context.Context, d time.Duration) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		clock.Advance(d)
		return nil
	})
	lim, err := limiter.New(st, s, append([]limiter.Option{sleep, limiter.WithClock(clock.Now)}, opts...)...)
	if err != nil {
		t.Fatalf("limitertest: %v", err)
	}
	return lim, clock
}

// Store returns a store on a fresh embedded Redis and its clock, for a
// Concurrency or several Limiters sharing one server.
func Store(t testing.TB) (store.Store, *Clock) {
	t.Helper()
	m := miniredis.NewMiniRedis()
	clock := &Clock{m: m, t: time.Now().Truncate(time.Second)}
	m.SetTime(clock.t)
	if err := m.Start(); err != nil {
		t.Fatalf("limitertest: start the embedded Redis: %v", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() {
		_ = rdb.Close()
		m.Close()
	})
	return goredis.New(rdb), clock
}
