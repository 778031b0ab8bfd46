package conformance_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// TestSpecsDeclareScripts: every strategy Spec, the known-bad controls'
// included, and every StoreCheck declares Scripts exactly when it runs
// Lua (a store check passes there unless it declares them): on a
// redis-server whose user may not run scripts (an ACL without
// @scripting), its calls (admitted, denied, peeked) meet NOPERM for EVAL
// or EVALSHA when, and only when, it declares Scripts. limiter check
// skips what cannot run on such a server by that declaration: a control
// claiming no scripts failed there with NOPERM, and was reported as
// having shown its bug.
func TestSpecsDeclareScripts(t *testing.T) {
	s := redistest.StartServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer admin.Close()
	if err := admin.Do(ctx, "ACL", "SETUSER", "noscript", "on", ">nspw", "~*", "&*", "+@all", "-@scripting").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "noscript", Password: "nspw", MaxRetries: -1})
	defer rdb.Close()
	st := goredis.New(rdb)
	specs := conformance.Strategies()
	for _, ctl := range conformance.KnownBad() {
		if ctl.Wrap == nil && ctl.Spec.Strategy != nil {
			specs = append(specs, ctl.Spec)
		}
	}
	for i, spec := range specs {
		if spec.Strategy == nil {
			continue // (a Leaser's Spec: its scripts are the strategy package's)
		}
		lim, err := limiter.New(st, spec.Strategy, limiter.WithPrefix(fmt.Sprintf("sd%d", i)))
		if err != nil {
			t.Fatalf("%s: %v", spec.Name, err)
		}
		if err := admin.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		// (errors are not looked at: a control may swallow them; the
		// server counts the scripts it refused)
		l := limiter.PerMinute(2)
		for range 3 { // admitted, admitted, denied
			_, _ = lim.Allow(ctx, "s", l)
		}
		_, _ = lim.Peek(ctx, "s", l)
		stats, err := admin.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		refused := regexp.MustCompile(`(?m)^cmdstat_(eval|evalsha|eval_ro|evalsha_ro|fcall):.*rejected_calls=[1-9]`).FindString(stats)
		if (refused != "") != spec.Scripts {
			t.Errorf("%s declares Scripts %v; scripts refused to it: %q", spec.Name, spec.Scripts, refused)
		}
	}
	for _, sc := range conformance.StoreChecks() {
		o := conformance.RunStoreChecks(ctx, conformance.RedisAt(s.Addr(), noScriptDial), []conformance.StoreCheck{sc})
		if len(o) != 1 || o[0].Skipped || o[0].Passed == sc.Scripts {
			t.Errorf("store check %s declares Scripts %v; on a server refusing scripts: %+v", sc.Name, sc.Scripts, o)
		}
	}
}

// noScriptDial connects as the user TestSpecsDeclareScripts makes, who may
// not run scripts.
func noScriptDial(_ context.Context, addr string) (store.Store, func(), error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, Username: "noscript", Password: "nspw", MaxRetries: -1})
	return goredis.New(rdb), func() { _ = rdb.Close() }, nil
}
