package strategy_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// readmeACL reads the README's ACL table: for each row, its first cell
// (a strategy's name, or "with WithQuotaLease") and the commands in its
// second.
func readmeACL(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	in := false
	row := regexp.MustCompile("^\\s*\\| `?([^|`]+?)`? \\| `([A-Z|\\\\ ]+)` \\|$")
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "| strategy | commands its user needs |") {
			in = true
			continue
		}
		if !in {
			continue
		}
		if strings.Contains(line, "|---") {
			continue
		}
		m := row.FindStringSubmatch(line)
		if m == nil {
			break
		}
		// a pipe in a table cell is escaped, even in code (CLUSTER\|SLOTS)
		rows[m[1]] = strings.Fields(strings.ReplaceAll(m[2], `\|`, "|"))
	}
	if len(rows) == 0 {
		t.Fatal("README: no ACL table")
	}
	return rows
}

// TestACLCommandsInREADME: a user that may run exactly the commands the
// README's ACL table lists for a strategy, on keys under the limiter's
// prefix, runs everything the Limiter does with it on a redis-server
// (Redis checks the commands a script runs against the user's ACL):
// decisions that create, count and deny, a cost above 1, two limits, a
// peek, a reset, AllowMany, with the script cache empty (EVALSHA, then
// EVAL); and, with the quota lease row added, leases taken and given back.
func TestACLCommandsInREADME(t *testing.T) {
	rows := readmeACL(t)
	admin := realServer(t)
	ctx := context.Background()
	strategies := map[string]limiter.Strategy{
		"FixedWindow":   strategy.NewFixedWindow(),
		"AlignedWindow": strategy.NewAlignedWindow(),
		"Bucketed":      strategy.NewBucketed(),
		"Optimistic":    strategy.NewOptimistic(),
		"GCRA":          strategy.NewGCRA(),
		"TokenBucket":   strategy.NewTokenBucket(),
		"SlidingWindow": strategy.NewSlidingWindow(),
		"SlidingLog":    strategy.NewSlidingLog(),
	}
	for name := range rows {
		if _, ok := strategies[name]; !ok && name != "Concurrency" && name != "with WithQuotaLease" && name != "on a Cluster" {
			t.Errorf("README's ACL table lists %q, which this test does not know", name)
		}
	}
	// user returns a go-redis store of a new user that may run cmds on
	// keys under "t:".
	user := func(t *testing.T, name string, cmds []string) store.Store {
		t.Helper()
		args := []any{"ACL", "SETUSER", name, "reset", "on", ">pw", "~t:*"}
		for _, c := range cmds {
			args = append(args, "+"+strings.ToLower(c))
		}
		if err := admin.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
		if err := admin.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		opts := *admin.Options()
		opts.Username, opts.Password = name, "pw"
		rdb := redis.NewClient(&opts)
		t.Cleanup(func() { _ = rdb.Close() })
		return goredis.New(rdb)
	}
	for name, s := range strategies {
		t.Run(name, func(t *testing.T) {
			cmds, ok := rows[name]
			if !ok {
				t.Fatalf("README's ACL table has no row for %s", name)
			}
			lim := newLim(t, user(t, "u-"+name, cmds), s)
			three, five := limiter.PerMinute(3), limiter.PerHour(5)
			for i := range 4 {
				if r, err := lim.Allow(ctx, name+"a", three); err != nil || r.Allowed != (i < 3) {
					t.Fatalf("call %d: %+v, %v; want allowed=%v", i+1, r, err, i < 3)
				}
			}
			if r, err := lim.AllowN(ctx, name+"b", 2, three); err != nil || !r.Allowed {
				t.Fatalf("AllowN(2): %+v, %v", r, err)
			}
			for i := range 4 {
				if r, err := lim.Allow(ctx, name+"c", five, three); err != nil || r.Allowed != (i < 3) {
					t.Fatalf("two limits, call %d: %+v, %v; want allowed=%v", i+1, r, err, i < 3)
				}
			}
			if _, err := lim.Peek(ctx, name+"c", five, three); err != nil {
				t.Fatalf("Peek: %v", err)
			}
			if err := lim.Reset(ctx, name+"a", three); err != nil {
				t.Fatalf("Reset: %v", err)
			}
			if r, err := lim.Allow(ctx, name+"a", three); err != nil || !r.Allowed {
				t.Fatalf("after Reset: %+v, %v", r, err)
			}
			for i, a := range lim.AllowMany(ctx, []limiter.Ask{{Key: name + "d", Limits: []limiter.Limit{three}}, {Key: name + "e", Limits: []limiter.Limit{three}}}) {
				if a.Err != nil || !a.Result.Allowed {
					t.Fatalf("AllowMany answer %d: %+v", i, a)
				}
			}
			if _, ok := s.(limiter.QuotaReturner); !ok {
				return
			}
			extra, ok := rows["with WithQuotaLease"]
			if !ok {
				t.Fatal("README's ACL table has no row for quota leases")
			}
			st := user(t, "ul-"+name, append(append([]string(nil), cmds...), extra...))
			leased, err := limiter.New(st, s, limiter.WithPrefix("t"), limiter.WithQuotaLease(2))
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if r, err := leased.Allow(ctx, name+"l", five); err != nil || !r.Allowed {
					t.Fatalf("leased call %d: %+v, %v", i+1, r, err)
				}
			}
			if n, err := leased.ReturnLeases(ctx, 0); err != nil || n != 1 {
				t.Fatalf("ReturnLeases = %d, %v; want 1 unit given back", n, err)
			}
		})
	}
	t.Run("Concurrency", func(t *testing.T) {
		cmds, ok := rows["Concurrency"]
		if !ok {
			t.Fatal("README's ACL table has no row for Concurrency")
		}
		c, err := limiter.NewConcurrency(user(t, "u-concurrency", cmds), strategy.NewConcurrency(), limiter.WithPrefix("t"))
		if err != nil {
			t.Fatal(err)
		}
		f := limiter.InFlight{Max: 1, TTL: time.Minute}
		l, err := c.Acquire(ctx, "x", f)
		if err != nil || !l.Held {
			t.Fatalf("Acquire: %+v, %v", l, err)
		}
		if l2, err := c.Acquire(ctx, "x", f); err != nil || l2.Held {
			t.Fatalf("second Acquire: %+v, %v; want refused", l2, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
	})
}
