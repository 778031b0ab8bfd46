package store_test

import (
	"errors"
	"testing"

	"github.com/quotagate/limiter/store"
)

func TestConnCommand(t *testing.T) {
	for name, want := range map[string]bool{
		"MULTI": true, "exec": true, "Discard": true, "WATCH": true, "unwatch": true, "MONITOR": true,
		"SUBSCRIBE": true, "psubscribe": true, "SSUBSCRIBE": true, "UNSUBSCRIBE": true,
		"GET": false, "EVALSHA": false, "EXECX": false, "SCRIBE": false, "": false, "TIME": false,
	} {
		if got := store.ConnCommand(name); got != want {
			t.Errorf("ConnCommand(%q) = %v, want %v", name, got, want)
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
