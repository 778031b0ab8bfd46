package store_test

import (
	"testing"

	"github.com/quotagate/limiter/store"
)

// TestKeyIndexFirstKey: the commands whose first key is not their first
// argument: a Cluster adapter routes them by that key's slot, not by the
// slot of "AND" or of numkeys "2".
func TestKeyIndexFirstKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []any
	}{
		{"BITOP", []any{"AND", "{u}k", "{u}a"}},
		{"OBJECT", []any{"ENCODING", "{u}k"}},
		{"MEMORY", []any{"USAGE", "{u}k"}},
		{"XINFO", []any{"STREAM", "{u}k"}},
		{"XGROUP", []any{"CREATE", "{u}k", "g", "$"}},
		{"LMPOP", []any{2, "{u}k", "{u}a", "LEFT"}},
		{"ZMPOP", []any{2, "{u}k", "{u}a", "MIN"}},
		{"SINTERCARD", []any{2, "{u}k", "{u}a"}},
		{"ZINTERCARD", []any{2, "{u}k", "{u}a"}},
		{"ZUNION", []any{2, "{u}k", "{u}a"}},
		{"ZINTER", []any{2, "{u}k", "{u}a"}},
		{"ZDIFF", []any{2, "{u}k", "{u}a"}},
		{"EVAL_RO", []any{"return 1", 1, "{u}k"}},
		{"EVALSHA_RO", []any{"sha", 1, "{u}k"}},
		{"FCALL", []any{"f", 1, "{u}k"}},
		{"FCALL_RO", []any{"f", 1, "{u}k"}},
		{"BLMPOP", []any{0, 2, "{u}k", "{u}a", "LEFT"}},
	} {
		if k := (store.Cmd{Name: tc.name, Args: tc.args}).Key(); k != "{u}k" {
			t.Errorf("%s %v: Key() = %q, want {u}k", tc.name, tc.args, k)
		}
	}
}
