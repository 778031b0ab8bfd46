package redigo_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/quotagate/limiter/internal/adaptertest"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store/redigo"
)

const incr = adaptertest.CountScript

// countingPool counts the connections the Store takes: one per round trip.
type countingPool struct {
	*redis.Pool
	gets atomic.Int64
}

func (p *countingPool) GetContext(ctx context.Context) (redis.Conn, error) {
	p.gets.Add(1)
	return p.Pool.GetContext(ctx)
}

// TestSharedPipelines: many callers on one server share round trips
// (fewer connections taken than calls), every call answered with a count
// of its own and the key counting exactly the calls; with sharing off,
// one connection per call.
func TestSharedPipelines(t *testing.T) {
	srv := redistest.StartServer(t)
	for _, tc := range []struct {
		name string
		opts []redigo.Option
	}{{"shared", nil}, {"off", []redigo.Option{redigo.WithSharedPipelines(0)}}} {
		t.Run(tc.name, func(t *testing.T) {
			p := &countingPool{Pool: newPool(srv.Addr(), 64)}
			t.Cleanup(func() { _ = p.Close() })
			st := redigo.New(p, tc.opts...)
			const callers, each = 24, 40
			key := "k-" + tc.name
			o := adaptertest.Hammer(t, st, key, callers, each, func(int, int) time.Duration { return 30 * time.Second })
			if o.Admitted != callers*each {
				t.Fatalf("%+v; want all %d admitted", o, callers*each)
			}
			c := p.Get()
			n, err := redis.Int64(c.Do("GET", key))
			_ = c.Close()
			if err != nil || n != callers*each {
				t.Errorf("%s = %d, %v; want %d", key, n, err, callers*each)
			}
			gets := p.gets.Load() // (the GET above took its connection with Get, uncounted)
			if tc.opts == nil && gets >= callers*each {
				t.Errorf("%d callers took %d connections for %d calls: no round trip shared", callers, gets, callers*each)
			}
			if tc.opts != nil && gets != callers*each {
				t.Errorf("sharing off: %d connections for %d calls; want one each", gets, callers*each)
			}
		})
	}
}

// TestSharedPipelinesDeadlineStorm: many callers on one key with deadlines
// of a fraction of a millisecond to a few, so that calls end while queued,
// while their pipeline is out, and after their replies. Every call that
// failed without store.ErrUnknownOutcome never ran: the key counts at
// least every admitted call and at most those plus the unknown outcomes.
func TestSharedPipelinesDeadlineStorm(t *testing.T) {
	srv := redistest.StartServer(t)
	p := newPool(srv.Addr(), 64)
	t.Cleanup(func() { _ = p.Close() })
	st := redigo.New(p)
	const callers, each = 32, 60
	o := adaptertest.Hammer(t, st, "storm", callers, each, adaptertest.StormTimeout(each))
	// calls given up on may still be in flight: wait for their replies
	time.Sleep(time.Second)
	c := p.Get()
	n, err := redis.Int64(c.Do("GET", "storm"))
	_ = c.Close()
	if err != nil && !errors.Is(err, redis.ErrNil) {
		t.Fatal(err)
	}
	o.CheckCount(t, n)
}

// TestSharedPipelineServerGone: calls queued behind a server that stops
// answering each end at their own deadline, and the Store serves again
// once it is back.
func TestSharedPipelineServerGone(t *testing.T) {
	m := redistest.NewMini(t)
	px := redistest.NewProxy(t, m.Addr())
	p := newPool(px.Addr(), 64)
	t.Cleanup(func() { _ = p.Close() })
	st := redigo.New(p)
	ctx := context.Background()
	if _, err := st.Eval(ctx, incr, []string{"k"}, nil); err != nil {
		t.Fatal(err)
	}
	px.Blackhole(true)
	start := time.Now()
	o := adaptertest.Hammer(t, st, "k", 12, 1, func(int, int) time.Duration { return 200 * time.Millisecond })
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("calls with 200ms deadlines on a silent server returned after %v", took.Round(time.Millisecond))
	}
	if o.Admitted != 0 || o.NotSent+o.Unknown != 12 {
		t.Errorf("on a silent server: %+v; want 12 failed", o)
	}
	px.Blackhole(false)
	for end := time.Now().Add(10 * time.Second); ; {
		c, cancel := context.WithTimeout(ctx, time.Second)
		_, err := st.Eval(c, incr, []string{"k"}, nil)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the store does not serve after the server came back: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
