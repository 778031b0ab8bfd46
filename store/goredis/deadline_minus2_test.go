package goredis_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store/goredis"
)

// TestSocketDeadlinesDisabled: with ReadTimeout or WriteTimeout -2 (no
// socket deadlines at all), ContextTimeoutEnabled does not bring a
// context's deadline to the socket, so the adapter bounds the call itself;
// it trusted ContextTimeoutEnabled, and a call with a 200 ms deadline on a
// blackholed server never returned.
func TestSocketDeadlinesDisabled(t *testing.T) {
	s := redistest.StartServer(t)
	p := redistest.NewProxy(t, s.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true, ReadTimeout: -2, WriteTimeout: -2})
	t.Cleanup(func() { _ = rdb.Close() })
	st := goredis.New(rdb)
	if _, err := st.Eval(context.Background(), "return 1", nil, nil); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	defer p.Blackhole(false) // frees the stuck call
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := st.Eval(ctx, "return redis.call('INCR', KEYS[1])", []string{"k"}, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if took := time.Since(start); took > time.Second {
			t.Errorf("returned after %v (%v); want about 200ms", took, err)
		}
	case <-time.After(3 * time.Second):
		t.Errorf("a call with a 200ms deadline had not returned after 3s (ReadTimeout -2, ContextTimeoutEnabled): the deadline does not bound it")
	}
}
