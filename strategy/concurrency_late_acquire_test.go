package strategy_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// lagProxy forwards TCP to target; once lag is called, the commands of the
// connections open at that moment reach the server d late (a congested
// connection, a TCP retransmission), while new connections are not delayed.
type lagProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []*atomic.Int64
}

func newLagProxy(t *testing.T, target string) *lagProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lagProxy{ln: ln, target: target}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			lag := new(atomic.Int64)
			p.mu.Lock()
			p.conns = append(p.conns, lag)
			p.mu.Unlock()
			t.Cleanup(func() { _ = c.Close(); _ = s.Close() })
			go func() { _, _ = io.Copy(c, s) }()
			go func() {
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						time.Sleep(time.Duration(lag.Load()))
						if _, err := s.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

func (p *lagProxy) lag(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Store(int64(d))
	}
}

// TestConcurrencyLateAcquireAfterTimeout: an Acquire that times out
// before its script reached Redis ends the lease it may have taken on
// another connection, which runs first; the script, arriving after, must
// take no slot (a ZREM alone let it take the subject's only slot under an
// ID nobody holds, for the whole lease TTL).
func TestConcurrencyLateAcquireAfterTimeout(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		m, _ := newMini(t)
		lateAcquireCase(t, m.Addr())
	})
	t.Run("redis-server", func(t *testing.T) {
		lateAcquireCase(t, redistest.StartServer(t).Addr())
	})
}

func lateAcquireCase(t *testing.T, addr string) {
	p := newLagProxy(t, addr)
	rdb := redis.NewClient(&redis.Options{Addr: p.ln.Addr().String(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	c := newConc(t, goredis.New(rdb), limiter.WithTimeout(100*time.Millisecond))
	ctx := context.Background()
	f := limiter.InFlight{Max: 1, TTL: time.Minute}
	warm, err := c.Acquire(ctx, "warm", f) // loads the script, opens one connection
	if err != nil || !warm.Held {
		t.Fatalf("Acquire = %+v, %v", warm, err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	p.lag(300 * time.Millisecond)
	l, err := c.Acquire(ctx, "u", f)
	if l.Held || !errors.Is(err, store.ErrUnknownOutcome) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with 300 ms of lag and a 100 ms timeout = %+v, %v; want an unknown outcome", l, err)
	}
	p.lag(0)                           // the network is fine again
	time.Sleep(500 * time.Millisecond) // the late script has run by now
	key, _ := limiter.InFlightKey("t", "u", f)
	set, _ := rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
	ttl, _ := rdb.PTTL(ctx, key).Result()
	if len(set) != 1 || set[0].Score >= 0 || ttl <= 0 || ttl > f.TTL {
		t.Errorf("lease set %s: %v, PTTL %s; want only the abandoned ID's tombstone (a negative score), expiring within the TTL", key, set, ttl)
	}
	retry, err := c.Acquire(ctx, "u", f)
	if err != nil || !retry.Held || retry.InFlight != 1 {
		t.Errorf("Acquire after the timed-out one = %+v, %v; want held, 1 in flight (no caller holds the only slot)", retry, err)
	}
}
