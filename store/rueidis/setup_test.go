package rueidis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// TestConnectionSetupErrors: a connection that cannot be set up (the
// password changed on the server, so the client's reconnect is refused)
// is reported as the server's refusal, on every strategy's path: never as a
// nil reply, and never as an unknown outcome, since nothing was sent.
func TestConnectionSetupErrors(t *testing.T) {
	s := redistest.StartServer(t, "--requirepass", "secret")
	st := newStore(t, s.Addr(), func(o *rueidis.ClientOption) { o.Password = "secret" })
	ctx := context.Background()
	if rs, err := st.Do(ctx, store.Cmd{Name: "CONFIG", Args: []any{"SET", "requirepass", "other"}}); err != nil || rs[0].Err != nil {
		t.Fatalf("CONFIG SET requirepass: %v %v", err, rs)
	}
	// Drop the client's connections: it must set up new ones.
	if rs, err := st.Do(ctx, store.Cmd{Name: "CLIENT", Args: []any{"KILL", "TYPE", "normal", "SKIPME", "no"}}); err != nil && !strings.Contains(err.Error(), "EOF") {
		t.Logf("CLIENT KILL: %v %v", err, rs)
	}
	// Wait until the client has noticed and its new connection is refused.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err := st.Do(ctx, store.Cmd{Name: "PING"})
		if err != nil && strings.Contains(err.Error(), "WRONGPASS") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PING 5s after the password changed: %v; want WRONGPASS", err)
		}
	}
	for _, s := range []limiter.Strategy{strategy.NewFixedWindow(), strategy.NewBucketed(), strategy.NewOptimistic()} {
		lim, err := limiter.New(st, s)
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		r, err := lim.Allow(cctx, "u", limiter.PerMinute(5))
		cancel()
		switch {
		case err == nil:
			t.Errorf("%T after the password changed = %+v, no error", s, r)
		case errors.Is(err, store.ErrNil) || errors.Is(err, store.ErrUnknownOutcome) || !strings.Contains(err.Error(), "WRONGPASS"):
			t.Errorf("%T after the password changed: %v; want the server's WRONGPASS, not a nil reply or an unknown outcome", s, err)
		}
	}
}
