package rueidis_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/rueidis"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
)

// TestExecMultiRefused: a MULTI the server refuses (an ACL without it)
// lets the queued commands run one by one, outside any transaction: Exec
// must report an unknown outcome, not a plain refusal as if nothing ran,
// and the connection must not go back to the pool still watching.
func TestExecMultiRefused(t *testing.T) {
	srv := redistest.StartServer(t)
	admin := newStore(t, srv.Addr(), nil)
	do1(t, admin, "ACL", "SETUSER", "lim", "on", ">pw", "~*", "&*", "+@all", "-multi")
	st := newStore(t, srv.Addr(), func(o *rueidis.ClientOption) {
		o.Username, o.Password = "lim", "pw"
		o.BlockingPoolSize = 1 // one dedicated connection: every Watch uses it
	})
	ctx := context.Background()
	do1(t, admin, "SET", "k", "1")

	err := st.Watch(ctx, []string{"k"}, func(tx store.Tx) error {
		_, err := tx.Exec(ctx, store.Cmd{Name: "INCR", Args: []any{"n"}})
		return err
	})
	ran := do1(t, admin, "GET", "n").Val == "1"
	if err == nil || (ran && !errors.Is(err, store.ErrUnknownOutcome)) {
		t.Errorf("Exec with MULTI refused = %v; the INCR ran (n=1: %v) outside the transaction, yet the error is not an unknown outcome", err, ran)
	}

	// The ACL is fixed; k changes; a transaction on another key must commit.
	do1(t, admin, "ACL", "SETUSER", "lim", "+multi")
	do1(t, admin, "SET", "k", "2")
	err = st.Watch(ctx, []string{"fresh"}, func(tx store.Tx) error {
		_, err := tx.Exec(ctx, store.Cmd{Name: "SET", Args: []any{"fresh", "v"}})
		return err
	})
	if err != nil {
		t.Errorf("a transaction on \"fresh\" after the refused one = %v; want committed (the pooled connection kept its WATCH of k)", err)
	}
}
