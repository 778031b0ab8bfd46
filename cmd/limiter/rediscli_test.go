package main

import (
	"os/exec"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestRedisCLI: the edit hint serve prints reaches the server of -redis: a
// Unix socket with -s (its path quoted for the shell when it needs it), a
// TCP address with -h and -p, with the database, user and TLS.
func TestRedisCLI(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"redis://127.0.0.1:6390/3", "redis-cli -h 127.0.0.1 -p 6390 -n 3"},
		{"redis://[::1]:6390", "redis-cli -h ::1 -p 6390"},
		{"rediss://ops:secret@cache.example:6380/0", "redis-cli -h cache.example -p 6380 --user ops --askpass --tls"},
		{"unix:///run/redis/redis.sock?db=2", "redis-cli -s /run/redis/redis.sock -n 2"},
		{"unix:///tmp/my redis/it's.sock", `redis-cli -s '/tmp/my redis/it'\''s.sock'`},
	} {
		opt, err := redis.ParseURL(tc.url)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		if got := redisCLI(opt); got != tc.want {
			t.Errorf("redisCLI(%s) = %q; want %q", tc.url, got, tc.want)
		}
	}
	// the quoting is the shell's: the quoted path comes back as one word
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("no sh to read the quoted path: %v", err)
	}
	out, err := exec.Command(sh, "-c", `printf %s `+shellWord("/tmp/my redis/it's.sock")).Output()
	if err != nil || string(out) != "/tmp/my redis/it's.sock" {
		t.Errorf("sh read %q (%v); want the path back", out, err)
	}
}
