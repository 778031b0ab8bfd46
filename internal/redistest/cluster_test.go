package redistest_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func newClusterClient(t *testing.T, c *redistest.Cluster) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func TestCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	begin := time.Now()
	c := redistest.StartCluster(t)
	t.Logf("3-master cluster up in %v", time.Since(begin))

	addrs := c.Addrs()
	if len(addrs) != 3 || len(slices.Compact(slices.Sorted(slices.Values(addrs)))) != 3 {
		t.Fatalf("Addrs() = %q, want 3 distinct addresses", addrs)
	}
	for _, a := range addrs {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Fatalf("Addrs() = %q", addrs)
		}
	}
	cc := newClusterClient(t, c)

	t.Run("keys on every master", func(t *testing.T) {
		keys := []string{"a", "b", "c"}
		slots := map[int64]bool{}
		for _, k := range keys {
			if err := cc.Set(ctx, k, "v-"+k, 0).Err(); err != nil {
				t.Fatalf("SET %s: %v", k, err)
			}
			if got, err := cc.Get(ctx, k).Result(); err != nil || got != "v-"+k {
				t.Fatalf("GET %s = %q, %v", k, got, err)
			}
			slot, err := cc.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			slots[slot] = true
		}
		if len(slots) != len(keys) {
			t.Fatalf("keys %q share slots: %v", keys, slots)
		}
		var mu sync.Mutex
		sizes := map[string]int64{}
		err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			n, err := m.DBSize(ctx).Result()
			mu.Lock()
			sizes[m.Options().Addr] = n
			mu.Unlock()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(sizes) != 3 {
			t.Fatalf("ForEachMaster saw %v, want the 3 masters %q", sizes, addrs)
		}
		for _, a := range addrs {
			if sizes[a] < 1 {
				t.Errorf("master %s holds %d keys, want >= 1 (all: %v)", a, sizes[a], sizes)
			}
		}
	})

	t.Run("EVAL with a shared hash tag", func(t *testing.T) {
		const script = `redis.call("SET", KEYS[1], ARGV[1])
redis.call("SET", KEYS[2], ARGV[2])
return redis.call("MGET", KEYS[1], KEYS[2])`
		keys := []string{"{user:1}:tokens", "{user:1}:ts"}
		got, err := cc.Eval(ctx, script, keys, "7", "42").StringSlice()
		if err != nil || !slices.Equal(got, []string{"7", "42"}) {
			t.Fatalf("EVAL = %q, %v", got, err)
		}
		if got, err := cc.Get(ctx, keys[1]).Result(); err != nil || got != "42" {
			t.Fatalf("GET %s = %q, %v", keys[1], got, err)
		}
	})

	t.Run("CROSSSLOT without a shared hash tag", func(t *testing.T) {
		crossSlot := func(what string, err error) {
			t.Helper()
			if err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
				t.Errorf("%s = %v, want CROSSSLOT", what, err)
			}
		}
		crossSlot("EVAL", cc.Eval(ctx, `return redis.call("GET", KEYS[1])`, []string{"a", "b"}).Err())
		crossSlot("RENAME", cc.Rename(ctx, "a", "b").Err())
		crossSlot("SUNIONSTORE", cc.SUnionStore(ctx, "s1", "s2").Err())
	})
}

// TestClusterClose starts a 4-master cluster and checks that Close stops
// every process and removes every temp dir.
func TestClusterClose(t *testing.T) {
	t.Parallel()
	needClusterBinaries(t)
	ctx := context.Background()
	begin := time.Now()
	c, err := redistest.StartClusterN(4)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("4-master cluster up in %v", time.Since(begin))
	defer c.Close()
	if len(c.Addrs()) != 4 {
		t.Fatalf("Addrs() = %q, want 4", c.Addrs())
	}

	var pids []int
	var dirs []string
	for _, addr := range c.Addrs() {
		rc := newClient(t, addr)
		info, err := rc.Info(ctx, "server").Result()
		if err != nil {
			t.Fatal(err)
		}
		_, rest, _ := strings.Cut(info, "process_id:")
		pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]))
		if err != nil {
			t.Fatalf("%s: no process_id in INFO: %v", addr, err)
		}
		pids = append(pids, pid)
		dir, err := rc.ConfigGet(ctx, "dir").Result()
		if err != nil || dir["dir"] == "" {
			t.Fatalf("%s: CONFIG GET dir = %v, %v", addr, dir, err)
		}
		if _, err := os.Stat(filepath.Join(dir["dir"], "nodes.conf")); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir["dir"])
		if mode, err := rc.ConfigGet(ctx, "cluster-enabled").Result(); err != nil || mode["cluster-enabled"] != "yes" {
			t.Fatalf("%s: cluster-enabled = %v, %v", addr, mode, err)
		}
		if nodes, err := rc.ClusterNodes(ctx).Result(); err != nil || strings.Count(nodes, "master") != 4 {
			t.Fatalf("%s: CLUSTER NODES = %q, %v; want 4 masters", addr, nodes, err)
		}
	}

	begin = time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close took %v", time.Since(begin))
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for i, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("pid %d still exists after Close (kill -0: %v)", pid, err)
		}
		if conn, err := net.DialTimeout("tcp", c.Addrs()[i], time.Second); err == nil {
			conn.Close()
			t.Errorf("%s still accepts connections after Close", c.Addrs()[i])
		}
		if _, err := os.Stat(dirs[i]); !os.IsNotExist(err) {
			t.Errorf("temp dir %s still there after Close: %v", dirs[i], err)
		}
	}
}

func TestStartClusterTooFew(t *testing.T) {
	t.Parallel()
	if c, err := redistest.StartClusterN(2); err == nil {
		c.Close()
		t.Fatal("StartClusterN(2) succeeded")
	}
}

// clusterTB records how StartCluster gave up.
type clusterTB struct {
	testing.TB
	how string
}

func (r *clusterTB) Helper()        {}
func (r *clusterTB) Fatal(...any)   { r.how = "fatal"; runtime.Goexit() }
func (r *clusterTB) Skip(...any)    { r.how = "skip"; runtime.Goexit() }
func (r *clusterTB) Cleanup(func()) { r.how = "started" }

// TestStartClusterWithoutRedisCli runs StartCluster with a PATH that holds
// only redis-server, as an OS package without the CLI tools would.
func TestStartClusterWithoutRedisCli(t *testing.T) {
	bin := t.TempDir()
	if server, err := exec.LookPath("redis-server"); err == nil {
		if err := os.Symlink(server, filepath.Join(bin, "redis-server")); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin)
	if _, err := redistest.StartClusterN(3); err == nil || !strings.Contains(err.Error(), "redis-") {
		t.Fatalf("StartClusterN without redis-cli = %v", err)
	}
	for env, want := range map[string]string{"": "skip", "1": "fatal"} {
		t.Setenv("REQUIRE_REDIS", env)
		r := &clusterTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			redistest.StartCluster(r)
		}()
		<-done
		if r.how != want {
			t.Errorf("REQUIRE_REDIS=%q: StartCluster did %q, want %q", env, r.how, want)
		}
	}
}

func needClusterBinaries(t *testing.T) {
	t.Helper()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("REQUIRE_REDIS") == "1" {
				t.Fatalf("%s is not on PATH and REQUIRE_REDIS=1", bin)
			}
			t.Skipf("%s is not on PATH", bin)
		}
	}
}

// TestStartClusterCreateFails checks that a failing redis-cli --cluster
// create is reported with its output and the node logs.
func TestStartClusterCreateFails(t *testing.T) {
	needClusterBinaries(t)
	server, _ := exec.LookPath("redis-server")
	bin := t.TempDir()
	if err := os.Symlink(server, filepath.Join(bin, "redis-server")); err != nil {
		t.Fatal(err)
	}
	fake := "#!/bin/sh\necho 'boom: the fake redis-cli failed'\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "redis-cli"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	c, err := redistest.StartClusterN(3)
	if err == nil {
		c.Close()
		t.Fatal("StartClusterN with a failing redis-cli succeeded")
	}
	for _, want := range []string{"boom: the fake redis-cli failed", "--- log of 127.0.0.1:", "cluster"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
