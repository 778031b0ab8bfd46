package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/quotagate/limiter/store"
)

func TestConnCommand(t *testing.T) {
	for name, want := range map[string]bool{
		"MULTI": true, "exec": true, "Discard": true, "WATCH": true, "unwatch": true, "MONITOR": true,
		"SUBSCRIBE": true, "psubscribe": true, "SSUBSCRIBE": true, "UNSUBSCRIBE": true,
		"SELECT": true, "reset": true, "HELLO": true, "Auth": true, "READONLY": true, "readwrite": true, "QUIT": true, "SYNC": true, "psync": true,
		"GET": false, "EVALSHA": false, "EXECX": false, "SCRIBE": false, "": false, "TIME": false, "CLIENT": false, "SELECTX": false,
	} {
		if got := store.ConnCommand(store.Cmd{Name: name}); got != want {
			t.Errorf("ConnCommand(%q) = %v, want %v", name, got, want)
		}
	}
	for _, c := range []struct {
		sub  any
		want bool
	}{{"REPLY", true}, {"reply", true}, {[]byte("TRACKING"), true}, {"CACHING", true}, {"no-evict", true}, {"NO-TOUCH", true}, {"ID", false}, {"LIST", false}, {"SETNAME", false}, {7, false}} {
		if got := store.ConnCommand(store.Cmd{Name: "client", Args: []any{c.sub, "OFF"}}); got != c.want {
			t.Errorf("ConnCommand(CLIENT %v) = %v, want %v", c.sub, got, c.want)
		}
	}
	// A transaction is whole when nothing inside it changes the
	// connection: SELECT or SUBSCRIBE queued in it would, once EXEC ran.
	for _, inner := range []string{"SELECT", "SUBSCRIBE", "MONITOR", "HELLO"} {
		cmds := []store.Cmd{{Name: "MULTI"}, {Name: inner, Args: []any{"1"}}, {Name: "EXEC"}}
		if err := store.CheckConnCommands(cmds); !errors.Is(err, store.ErrNotSupported) || !strings.Contains(err.Error(), inner) {
			t.Errorf("MULTI, %s, EXEC: %v; want ErrNotSupported naming %s", inner, err, inner)
		}
	}
	// A Watch's Tx: WATCH and UNWATCH in Tx.Do only, no other.
	for _, c := range []struct {
		name    string
		inMulti bool
		ok      bool
	}{{"WATCH", false, true}, {"UNWATCH", false, true}, {"GET", false, true}, {"GET", true, true},
		{"WATCH", true, false}, {"MULTI", false, false}, {"EXEC", false, false}, {"DISCARD", false, false}, {"SELECT", false, false}, {"SUBSCRIBE", true, false}} {
		err := store.CheckTxCommands([]store.Cmd{{Name: "GET", Args: []any{"k"}}, {Name: c.name, Args: []any{"k"}}}, c.inMulti)
		if (err == nil) != c.ok || err != nil && !errors.Is(err, store.ErrNotSupported) {
			t.Errorf("CheckTxCommands(GET, %s; inMulti %v) = %v; want ok %v (else ErrNotSupported)", c.name, c.inMulti, err, c.ok)
		}
	}
	tx := []store.Cmd{{Name: "MULTI"}, {Name: "INCR", Args: []any{"k"}}, {Name: "EXEC"}}
	if err := store.CheckConnCommands(tx); err != nil {
		t.Errorf("a whole transaction: %v", err)
	}
	if err := store.CheckConnCommands(tx[:2]); !errors.Is(err, store.ErrNotSupported) {
		t.Errorf("MULTI without EXEC: %v, want ErrNotSupported", err)
	}
	cmds := []store.Cmd{{Name: "GET", Args: []any{"a"}}, {Name: "WATCH", Args: []any{"a"}}, {Name: "GET", Args: []any{"b"}}}
	out := make([]store.Reply, len(cmds))
	rest, at := store.SplitConnCommands(cmds, out)
	if len(rest) != 2 || len(at) != 2 || at[0] != 0 || at[1] != 2 || !errors.Is(out[1].Err, store.ErrNotSupported) || out[0].Err != nil {
		t.Errorf("SplitConnCommands = %v, %v, out %v", rest, at, out)
	}
	if rest, at := store.SplitConnCommands(cmds[:1], out[:1]); at != nil || len(rest) != 1 {
		t.Errorf("SplitConnCommands without one = %v, %v; want cmds and nil", rest, at)
	}
}
