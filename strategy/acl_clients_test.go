package strategy_test

import (
	"context"
	"net"
	"testing"

	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/rueidis"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
	redigostore "github.com/quotagate/limiter/store/redigo"
	rueidisstore "github.com/quotagate/limiter/store/rueidis"
	"github.com/quotagate/limiter/strategy"
)

// TestACLCommandsInREADMEWithEachClient: the README's ACL row for
// FixedWindow is enough through rueidis and redigo as well (their
// connection set-up, HELLO and AUTH, needs no command of the table).
func TestACLCommandsInREADMEWithEachClient(t *testing.T) {
	rows := readmeACL(t)
	admin := realServer(t)
	ctx := context.Background()
	args := []any{"ACL", "SETUSER", "u-clients", "reset", "on", ">pw", "~t:*"}
	for _, c := range rows["FixedWindow"] {
		args = append(args, "+"+c)
	}
	if err := admin.Do(ctx, args...).Err(); err != nil {
		t.Fatal(err)
	}
	addr := admin.Options().Addr
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, Username: "u-clients", Password: "pw", DisableCache: true, ForceSingleClient: true, Dialer: net.Dialer{KeepAlive: -1, KeepAliveConfig: net.KeepAliveConfig{Enable: true}}})
	if err != nil {
		t.Fatalf("rueidis as the README's FixedWindow user: %v", err)
	}
	t.Cleanup(rc.Close)
	pool := &redigo.Pool{Dial: func() (redigo.Conn, error) {
		return redigo.Dial("tcp", addr, redigo.DialUsername("u-clients"), redigo.DialPassword("pw"))
	}}
	t.Cleanup(func() { _ = pool.Close() })
	for name, st := range map[string]store.Store{"rueidis": rueidisstore.New(rc), "redigo": redigostore.New(pool)} {
		t.Run(name, func(t *testing.T) {
			if err := admin.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			lim := newLim(t, st, strategy.NewFixedWindow())
			three := limiter.PerMinute(3)
			for i := range 4 {
				if r, err := lim.Allow(ctx, name+"-a", three); err != nil || r.Allowed != (i < 3) {
					t.Fatalf("call %d: %+v, %v; want allowed=%v", i+1, r, err, i < 3)
				}
			}
			if _, err := lim.AllowN(ctx, name+"-a", 2, three); err != nil {
				t.Fatalf("AllowN(2): %v", err)
			}
			if err := lim.Reset(ctx, name+"-a", three); err != nil {
				t.Fatalf("Reset: %v", err)
			}
		})
	}
}
