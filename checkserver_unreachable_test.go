package limiter_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// goneAfterInfo is a real go-redis store whose server becomes unreachable
// between CheckServer's INFO and its EVAL (a restart, a failover, or on a
// Cluster the other master that a keyless EVAL is sent to being down).
type goneAfterInfo struct {
	store.Store
	p *redistest.Proxy
}

func (g goneAfterInfo) Do(ctx context.Context, cmds ...store.Cmd) ([]store.Reply, error) {
	if len(cmds) > 0 && cmds[0].Name != "INFO" {
		_ = g.p.Close()
	}
	return g.Store.Do(ctx, cmds...)
}

func (g goneAfterInfo) Eval(ctx context.Context, src string, keys []string, args []any) (any, error) {
	_ = g.p.Close()
	return g.Store.Eval(ctx, src, keys, args)
}

// TestCheckServerUnreachableIsNotARefusal: CheckServer promises an
// error when "the server could not be reached", and ScriptingErr is "the
// refusal" of scripts. A connection refused on the EVAL is neither a
// refusal nor reported as an error: the report says scripts are refused
// and the error is nil.
func TestCheckServerUnreachableIsNotARefusal(t *testing.T) {
	m := redistest.NewMini(t)
	p := redistest.NewProxy(t, m.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	defer rdb.Close()
	r, err := limiter.CheckServer(context.Background(), goneAfterInfo{goredis.New(rdb), p})
	if err == nil {
		t.Errorf("CheckServer with the server gone at EVAL: err nil; report Scripting=%v ScriptingErr=%v Warnings=%q; want an error (the server could not be reached), not a refusal of scripts",
			r.Scripting, r.ScriptingErr, r.Warnings)
		for _, w := range r.Warnings {
			if strings.HasPrefix(w, "scripts are refused") {
				t.Logf("misleading warning: %s", w)
			}
		}
	}
}
