package redigo_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"github.com/mna/redisc"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/redigo"
)

// reviewPid returns the process id of the redis-server at addr.
func reviewPid(t *testing.T, addr string) int {
	t.Helper()
	info, err := redis.String(node(t, addr, "INFO", "server"), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`process_id:(\d+)`).FindStringSubmatch(info)
	pid, _ := strconv.Atoi(m[1])
	return pid
}

// TestBatchStalledSlotsNode: store.Batcher says a failure is the failure
// of the commands it touched, never of the others. On a Cluster whose slot
// map the Store has not read yet, Batch first reads CLUSTER SLOTS, which
// redisc sends to the owner of slot("SLOTS"). When that node does not
// answer (a host gone without RST, a stalled process), the healthy nodes'
// commands must still be answered; the read took the batch's whole
// deadline, and every command failed.
func TestBatchStalledSlotsNode(t *testing.T) {
	cl := redistest.StartCluster(t)
	addrs := cl.Addrs()
	for _, a := range addrs { // the healthy nodes keep serving their slots
		node(t, a, "CONFIG", "SET", "cluster-require-full-coverage", "no")
	}
	st := redigo.New(redigo.Cluster(newCluster(t, addrs)))
	stalled := owner(t, addrs, "SLOTS")
	var cmds []store.Cmd
	var owners []int
	for i := 0; len(cmds) < 9; i++ {
		k := fmt.Sprintf("review:%d", i)
		cmds = append(cmds, store.Cmd{Name: "INCR", Args: []any{k}})
		owners = append(owners, owner(t, addrs, k))
	}
	// Pooled connections to every node, with Do (Batch not called yet, so
	// the Store's slot map is not loaded).
	for _, c := range cmds {
		if _, err := st.Do(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	p, err := os.FindProcess(reviewPid(t, addrs[stalled]))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer p.Signal(syscall.SIGCONT)

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	rs := st.Batch(ctx, cmds)
	healthy := 0
	for i, r := range rs {
		if owners[i] == stalled {
			continue
		}
		healthy++
		if r.Err != nil || r.Val != int64(2) {
			t.Errorf("INCR %v on healthy node %d (node %d, owner of slot %d, stalled) = %+v; want 2", cmds[i].Args[0], owners[i], stalled, redisc.Slot("SLOTS"), r)
		}
	}
	if healthy == 0 {
		t.Fatal("no command on a healthy node: the test proves nothing")
	}
	// The stalled node's own commands may fail; they must be the only ones.
	for i, r := range rs {
		if owners[i] == stalled && r.Err != nil && !errors.Is(r.Err, context.DeadlineExceeded) {
			t.Logf("stalled node's command %d: %v", i, r.Err)
		}
	}
}
