package limiter_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store/goredis"
)

// TestCheckServer: the report names the version, the eviction policy, and
// whether this user may run scripts, and warns exactly when a policy can
// evict limiter keys or scripts are refused.
func TestCheckServer(t *testing.T) {
	ctx := context.Background()
	if _, err := limiter.CheckServer(ctx, nil); !errors.Is(err, limiter.ErrNilStore) {
		t.Errorf("CheckServer(nil) = %v, want ErrNilStore", err)
	}
	cases := []struct {
		name string
		args []string
		warn string // "" for none
	}{
		{"default", nil, ""},
		{"no maxmemory", []string{"--maxmemory-policy", "allkeys-lru"}, ""},
		{"volatile-lru", []string{"--maxmemory", "100mb", "--maxmemory-policy", "volatile-lru"}, "evicts keys with a TTL first"},
		{"allkeys-lfu", []string{"--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lfu"}, "may evict limiter keys"},
	}
	for _, c := range cases {
		s := redistest.StartServer(t, c.args...)
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		r, err := limiter.CheckServer(ctx, goredis.New(rdb))
		_ = rdb.Close()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if r.Version == "" || r.Mode != "standalone" || r.Role != "master" || !r.Scripting || r.MaxMemoryPolicy == "" {
			t.Errorf("%s: report %+v; want a version, standalone, master, scripting, a policy", c.name, r)
		}
		switch {
		case c.warn == "" && len(r.Warnings) != 0:
			t.Errorf("%s: warnings %q, want none", c.name, r.Warnings)
		case c.warn != "" && (len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], c.warn)):
			t.Errorf("%s: warnings %q, want one saying %q", c.name, r.Warnings, c.warn)
		}
	}

	// A user whose ACL forbids scripts.
	s := redistest.StartServer(t)
	admin := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer admin.Close()
	if err := admin.Do(ctx, "ACL", "SETUSER", "noscripts", "on", ">pw", "~*", "&*", "+@all", "-@scripting").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "noscripts", Password: "pw", MaxRetries: -1})
	defer rdb.Close()
	r, err := limiter.CheckServer(ctx, goredis.New(rdb))
	if err != nil {
		t.Fatal(err)
	}
	if r.Scripting || r.ScriptingErr == nil || !strings.Contains(r.ScriptingErr.Error(), "NOPERM") || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "FixedWindow") {
		t.Errorf("a user without scripting: %+v; want Scripting false, a NOPERM error and a warning naming FixedWindow", r)
	}

	// A replica: its role, and a warning naming its primary.
	host, port, _ := strings.Cut(s.Addr(), ":")
	replica := redistest.StartServer(t, "--replicaof", host, port)
	repl := redis.NewClient(&redis.Options{Addr: replica.Addr(), MaxRetries: -1})
	defer repl.Close()
	r, err = limiter.CheckServer(ctx, goredis.New(repl))
	if err != nil || r.Role != "slave" || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "a replica of "+s.Addr()+": it refuses the limiter's writes") {
		t.Errorf("a replica: %+v, %v; want role slave and one warning naming its primary %s", r, err, s.Addr())
	}

	// The embedded miniredis answers what it can; no error.
	m := redistest.NewMini(t)
	mdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	defer mdb.Close()
	if r, err := limiter.CheckServer(ctx, goredis.New(mdb)); err != nil || !r.Scripting {
		t.Errorf("miniredis: %+v, %v", r, err)
	}
}

// TestCheckServerNeedsPassword: on a server that requires a password, a
// connection without one is refused every command (NOAUTH): that is an
// error (the server cannot be used this way), not a report of a server
// whose scripts are refused.
func TestCheckServerNeedsPassword(t *testing.T) {
	ctx := context.Background()
	s := redistest.StartServer(t, "--requirepass", "s3cret")
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer rdb.Close()
	r, err := limiter.CheckServer(ctx, goredis.New(rdb))
	if err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("CheckServer without the password = %+v, %v; want an error saying NOAUTH", r, err)
	}
	good := redis.NewClient(&redis.Options{Addr: s.Addr(), Password: "s3cret", MaxRetries: -1})
	defer good.Close()
	if r, err := limiter.CheckServer(ctx, goredis.New(good)); err != nil || !r.Scripting || r.Version == "" {
		t.Errorf("CheckServer with the password = %+v, %v; want a report", r, err)
	}
}

// TestVersionAtLeast: versions compare number by number (6.0.10 is after
// 6.0.9), a missing part is 0, and an unknown or unparsable version is
// taken to be recent enough.
func TestVersionAtLeast(t *testing.T) {
	for _, tc := range []struct {
		version, min string
		want         bool
	}{
		{"6.0.9", "6.0.9", true},
		{"6.0.10", "6.0.9", true},
		{"6.0.8", "6.0.9", false},
		{"6.0", "6.0.9", false},
		{"5.0.14", "6.0.9", false},
		{"7", "6.0.9", true},
		{"6.2.0", "6.2", true},
		{"10.0.0", "9.9.9", true},
		{"", "6.0.9", true},
		{"7.2.4-rc1", "6.0.9", true},
		{"6.0.9", "", true},
	} {
		r := limiter.ServerReport{Version: tc.version}
		if got := r.VersionAtLeast(tc.min); got != tc.want {
			t.Errorf("%q.VersionAtLeast(%q) = %v, want %v", tc.version, tc.min, got, tc.want)
		}
	}
}
