package goredis_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// TestMultiRefused: a MULTI the server refuses (an ACL without it) lets the
// queued commands run one by one, outside any transaction, and go-redis
// gives MULTI's error to each of them as if none had run: a transaction in
// Watch (Exec) and one through Do must both report an unknown outcome, as
// the other adapters do, and the INCR has indeed run. (They returned the
// INCR refused, with NOPERM: a write reported as not made.)
func TestMultiRefused(t *testing.T) {
	srv := redistest.StartServer(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = admin.Close() })
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "lim", "on", ">pw", "~*", "&*", "+@all", "-multi").Err(); err != nil {
		t.Fatal(err)
	}
	for _, how := range []string{"Exec", "Do"} {
		// a client per case: go-redis puts back the connection whose
		// replies it left unread
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "lim", Password: "pw", MaxRetries: -1})
		st := goredis.New(rdb)
		key := "n-" + how
		var err error
		incr := store.Cmd{Name: "INCR", Args: []any{key}}
		if how == "Exec" {
			err = st.Watch(ctx, []string{key}, func(tx store.Tx) error {
				_, err := tx.Exec(ctx, incr)
				return err
			})
		} else {
			_, err = st.Do(ctx, store.Cmd{Name: "MULTI"}, incr, store.Cmd{Name: "EXEC"})
		}
		n, _ := admin.Get(ctx, key).Int()
		if n != 1 || !errors.Is(err, store.ErrUnknownOutcome) {
			t.Errorf("%s with MULTI refused = %v, and the INCR ran %d times; want an unknown outcome, and 1", how, err, n)
		}
		_ = rdb.Close()
	}
}
