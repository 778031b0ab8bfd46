package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/quotagate/limiter/store"
)

// TestKeyIndexEdges: commands without a key (or too few arguments for one)
// have none, and Key never panics on them; the numkeys commands' first key
// follows numkeys.
func TestKeyIndexEdges(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []any
		want int
	}{
		{"GET", nil, -1},
		{"OBJECT", []any{"HELP"}, -1},
		{"OBJECT", []any{"ENCODING", "k"}, 1},
		{"EVAL", []any{"return 1", 1}, -1}, // numkeys 1, but no key
		{"EVAL", []any{"return 1", 1, "k"}, 2},
		{"BLMPOP", []any{0, 1, "k", "LEFT"}, 2},
		{"BZMPOP", []any{0, 1, "k", "MIN"}, 2},
		{"ZMPOP", []any{1, "k", "MIN"}, 1},
		{"LMPOP", []any{1, "k", "LEFT"}, 1},
	} {
		c := store.Cmd{Name: tc.name, Args: tc.args}
		if got := store.KeyIndex(tc.name, tc.args); got != tc.want {
			t.Errorf("KeyIndex(%s %v) = %d, want %d", tc.name, tc.args, got, tc.want)
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("Cmd{%s %v}.Key() panicked: %v", tc.name, tc.args, p)
				}
			}()
			_ = c.Key()
		}()
	}
}

// TestKeySlotEmptyTag: an empty hash tag "{}" is no tag; the whole key is
// hashed (Redis Cluster spec), so two such keys are not forced together.
func TestKeySlotEmptyTag(t *testing.T) {
	if store.KeySlot("{}foo") == store.KeySlot("{}bar") {
		t.Errorf("KeySlot({}foo) == KeySlot({}bar) = %d: the empty tag was hashed", store.KeySlot("{}foo"))
	}
	if got, want := store.KeySlot("{foo}bar"), store.KeySlot("foo"); got != want || want != 12182 {
		t.Errorf("KeySlot({foo}bar) = %d, KeySlot(foo) = %d, want 12182", got, want)
	}
}

// TestIsTxRejectsWatch: IsTx is false when WATCH or UNWATCH is among the
// commands between MULTI and EXEC.
func TestIsTxRejectsWatch(t *testing.T) {
	for _, inner := range []string{"WATCH", "UNWATCH", "DISCARD", "MULTI", "EXEC"} {
		cmds := []store.Cmd{{Name: "MULTI"}, {Name: inner, Args: []any{"k"}}, {Name: "EXEC"}}
		if store.IsTx(cmds) {
			t.Errorf("IsTx(MULTI %s EXEC) = true", inner)
		}
	}
	if !store.IsTx([]store.Cmd{{Name: "multi"}, {Name: "INCR", Args: []any{"k"}}, {Name: "exec"}}) {
		t.Error("IsTx(multi INCR exec) = false")
	}
}

// alwaysTryAgain refuses every command with TRYAGAIN, up to a cap past
// which it answers with another error so a runaway loop ends.
type alwaysTryAgain struct{ calls *int }

var errRunaway = errors.New("runaway: sent too often")

func (a alwaysTryAgain) Do(context.Context, ...store.Cmd) ([]store.Reply, error) {
	*a.calls++
	if *a.calls > 50 {
		return nil, errRunaway
	}
	return []store.Reply{{Err: fmt.Errorf("TRYAGAIN Multiple keys request during rehashing of slot: %w", store.ErrTryAgain)}}, nil
}
func (alwaysTryAgain) EvalSha(context.Context, string, []string, []any) (any, error) {
	return nil, errRunaway
}
func (alwaysTryAgain) Eval(context.Context, string, []string, []any) (any, error) {
	return nil, errRunaway
}

// TestDoAgainGivesUpWithoutDeadline: on a ctx without a deadline,
// TryAgainPause allows about a second of pauses (tryAgainTries sends),
// so DoAgain returns the TRYAGAIN after a bounded number of sends.
func TestDoAgainGivesUpWithoutDeadline(t *testing.T) {
	calls := 0
	r, err := store.DoAgain(context.Background(), alwaysTryAgain{&calls}, store.Cmd{Name: "MGET", Args: []any{"{a}1", "{a}2"}})
	if err != nil || !errors.Is(r.Err, store.ErrTryAgain) || calls > 20 {
		t.Errorf("DoAgain on a persistent TRYAGAIN: %v, %v after %d sends; want the TRYAGAIN reply after at most 20 sends", r.Err, err, calls)
	}
}

// TestAppendInt64sBareInteger: "or an integer reply (int64) as one value".
func TestAppendInt64sBareInteger(t *testing.T) {
	got, err := store.AppendInt64s([]int64{1}, int64(7))
	if err != nil || len(got) != 2 || got[1] != 7 {
		t.Errorf("AppendInt64s([1], 7) = %v, %v; want [1 7]", got, err)
	}
}
