package limiter_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// TestCheckServerScriptWarningNamesEveryScriptStrategy: README's ACL table
// lists EVALSHA EVAL for AlignedWindow, GCRA, TokenBucket, SlidingWindow,
// SlidingLog and Concurrency as well as FixedWindow; only Bucketed and
// Optimistic run without scripts. A warning that says only FixedWindow
// cannot run tells a GCRA user that all is well.
func TestCheckServerScriptWarningNamesEveryScriptStrategy(t *testing.T) {
	ctx := context.Background()
	s := redistest.StartServer(t)
	admin := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer admin.Close()
	if err := admin.Do(ctx, "ACL", "SETUSER", "noscripts", "on", ">pw", "~*", "&*", "+@all", "-@scripting").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "noscripts", Password: "pw", MaxRetries: -1})
	defer rdb.Close()
	r, err := limiter.CheckServer(ctx, goredis.New(rdb))
	if err != nil || len(r.Warnings) != 1 {
		t.Fatalf("%+v, %v", r, err)
	}
	for _, name := range []string{"FixedWindow", "AlignedWindow", "GCRA", "TokenBucket", "SlidingWindow", "SlidingLog", "Concurrency"} {
		if !strings.Contains(r.Warnings[0], name) {
			t.Errorf("warning %q does not name %s, which needs EVAL/EVALSHA too", r.Warnings[0], name)
		}
	}
}

// TestCheckServerBusyIsNotARefusal: Scripting "reports that this
// connection may run Lua (EVAL): the server allows it and the user's ACL
// does; ScriptingErr is the refusal otherwise". A server busy with another
// client's script allows scripts and the ACL does too; BUSY is transient,
// not a refusal, yet the report says scripts are refused and FixedWindow
// cannot run here.
func TestCheckServerBusyIsNotARefusal(t *testing.T) {
	ctx := context.Background()
	s := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil { // connect before the server is busy
		t.Fatal(err)
	}
	end := redistest.Busy(t, s.Addr())
	r, err := limiter.CheckServer(ctx, goredis.New(rdb))
	end()
	if err == nil || !strings.Contains(err.Error(), "BUSY") || !strings.Contains(err.Error(), "cannot answer now") {
		t.Errorf("CheckServer while another script runs: %v (Scripting %v, ScriptingErr %v, warnings %q); want an error saying the server cannot answer now (BUSY), not a report that scripts are refused", err, r.Scripting, r.ScriptingErr, r.Warnings)
	}
}

// TestCheckServerSentinelWarns: Mode may be "sentinel", and Warnings "say
// what on this server can make a limit fail". A Sentinel (INFO and EVAL
// replies as redis-server --sentinel 7.0 gives them) stores no keys: no
// strategy can run on it, yet the only warning says "Bucketed and
// Optimistic can".
func TestCheckServerSentinelWarns(t *testing.T) {
	r, err := limiter.CheckServer(context.Background(), fakeServer{
		info: infoReply("redis_version:7.0.15", "redis_mode:sentinel", "", "# Sentinel", "sentinel_masters:1"),
		eval: []store.Reply{{Err: errors.New("ERR unknown command 'EVAL', with args beginning with: 'return 1' '0' ")}},
	})
	if err != nil {
		t.Fatalf("on a Sentinel: %v; want a report warning that it is one", err)
	}
	said := false
	for _, w := range r.Warnings {
		if strings.Contains(strings.ToLower(w), "sentinel") {
			said = true
		}
		if strings.Contains(w, "Bucketed and Optimistic can") {
			t.Errorf("on a Sentinel, warning %q says Bucketed and Optimistic can run", w)
		}
	}
	if !said {
		t.Errorf("on a Sentinel (Mode %q): warnings %q; want one saying this is a Sentinel, not the server to limit on", r.Mode, r.Warnings)
	}
}
