package rueidis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/quotagate/limiter/internal/adaptertest"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
)

// TestConnectionSetupErrors: the password changed on the server, so the
// client's new connections are refused: every call fails with the
// server's refusal (adaptertest.Refused). rueidis connects when it is
// made, so the client starts with the right password.
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
	adaptertest.Refused(t, st)
}
