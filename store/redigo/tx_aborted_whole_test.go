package redigo_test

import (
	"context"
	"testing"

	"github.com/gomodule/redigo/redis"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/redigo"
)

// doc.go: "a transaction (MULTI ... EXEC in one Do) is redirected whole".
// A transaction the node aborted (EXECABORT) because one command was on
// another node's slot (MOVED) and another was malformed ran nothing: no
// command of it may run elsewhere on its own.
func TestAbortedTxRunsNothingElsewhere(t *testing.T) {
	cl := redistest.StartCluster(t)
	addrs := cl.Addrs()
	st := redigo.New(redigo.Cluster(newCluster(t, addrs)))
	ctx := context.Background()
	local := "{a}x"
	var remote string
	for i := 0; ; i++ {
		remote = "{b" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + "}y"
		if owner(t, addrs, remote) != owner(t, addrs, local) {
			break
		}
	}
	rs, err := st.Do(ctx,
		store.Cmd{Name: "MULTI"},
		store.Cmd{Name: "INCR", Args: []any{local}},
		store.Cmd{Name: "INCR", Args: []any{remote}},          // MOVED
		store.Cmd{Name: "INCR", Args: []any{"{a}z", "extra"}}, // wrong number of arguments
		store.Cmd{Name: "EXEC"},
	)
	t.Logf("replies %+v, %v", rs, err)
	for _, k := range []string{local, remote} {
		v := node(t, addrs[owner(t, addrs, k)], "GET", k)
		if v != nil {
			n, _ := redis.Int(v, nil)
			t.Errorf("%s = %d after an aborted transaction; want no key", k, n)
		}
	}
}
