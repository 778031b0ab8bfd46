package redistest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/quotagate/limiter/internal/redistest"
)

func TestMiniAdvance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := redistest.NewMini(t)
	c := newClient(t, m.Addr())

	t0, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if !t0.Equal(m.Now()) {
		t.Fatalf("TIME = %v, Now() = %v", t0, m.Now())
	}
	if err := c.Set(ctx, "k", "v", time.Second).Err(); err != nil { // PX 1000
		t.Fatal(err)
	}
	m.Advance(999 * time.Millisecond)
	if ttl, err := c.PTTL(ctx, "k").Result(); err != nil || ttl != time.Millisecond {
		t.Fatalf("PTTL = %v, %v; want 1ms", ttl, err)
	}
	m.Advance(time.Millisecond)
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS = %d, %v; want 0", n, err)
	}
	t1, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if d := t1.Sub(t0); d != time.Second {
		t.Fatalf("TIME moved by %v, want 1s", d)
	}
}

func TestMiniAdvanceConcurrent(t *testing.T) {
	t.Parallel()
	m := redistest.NewMini(t)
	start := m.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				m.Advance(time.Millisecond)
			}
		})
	}
	wg.Wait()
	if d := m.Now().Sub(start); d != 200*time.Millisecond {
		t.Fatalf("clock moved by %v, want 200ms", d)
	}
}
