package limiter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/quotagate/limiter/store"
)

// TestUnpackMany: each call a many-request call carried gets its element
// (an error element as its error, a nil one as ErrNil); a reply of the
// wrong shape or a failed call fails every call it carried, and a call
// sent alone keeps its reply.
func TestUnpackMany(t *testing.T) {
	bad := errors.New("WRONGTYPE Operation against a key holding the wrong kind of value")
	lost := errors.New("lost")
	replies := []store.Reply{
		{Val: []any{int64(7), bad, nil, []any{int64(1), int64(2)}}}, // calls 0, 2, 3, 5
		{Val: int64(9)},        // call 1 alone
		{Val: []any{int64(1)}}, // calls 4, 6: one element for two
		{Err: lost},            // calls 7, 8
	}
	parts := []manyPart{
		{calls: []int{0, 2, 3, 5}, many: true},
		{calls: []int{1}},
		{calls: []int{4, 6}, many: true},
		{calls: []int{7, 8}, many: true},
	}
	out := unpackMany(replies, parts, make([]store.Reply, 9))
	if out[0].Val != int64(7) || out[0].Err != nil {
		t.Errorf("call 0: %+v, want 7", out[0])
	}
	if out[1].Val != int64(9) || out[1].Err != nil {
		t.Errorf("call 1 (alone): %+v, want 9", out[1])
	}
	if !errors.Is(out[2].Err, bad) {
		t.Errorf("call 2: %+v, want the error element", out[2])
	}
	if !errors.Is(out[3].Err, store.ErrNil) {
		t.Errorf("call 3: %+v, want ErrNil", out[3])
	}
	if v, ok := out[5].Val.([]any); !ok || len(v) != 2 || out[5].Err != nil {
		t.Errorf("call 5: %+v, want its array", out[5])
	}
	for _, j := range []int{4, 6} {
		if out[j].Err == nil || out[j].Val != nil {
			t.Errorf("call %d of a reply with one element for two: %+v, want an error", j, out[j])
		}
	}
	for _, j := range []int{7, 8} {
		if !errors.Is(out[j].Err, lost) {
			t.Errorf("call %d of a failed call: %+v, want its error", j, out[j])
		}
	}
}

// manyOf is a ManyScriptStrategy whose scripts a and b have companions
// and c has none.
type manyOf struct {
	ScriptStrategy
	a, b, c, ma, mb *store.Script
}

func (m manyOf) ManyScript(s *store.Script) *store.Script {
	switch s {
	case m.a:
		return m.ma
	case m.b:
		return m.mb
	}
	return nil
}

// TestPackMany: calls go in calls of their script's companion, 64 at most
// each and in order, a lone call of a script stays as it is, and so do
// the calls of a script without a companion; a call whose arguments equal
// the one's before it in the same call sends -1 for them; and a call
// becomes EVALSHA, or EVAL with its script's source.
func TestPackMany(t *testing.T) {
	m := manyOf{a: store.NewScript("return 'a'"), b: store.NewScript("return 'b'"), c: store.NewScript("return 'c'"),
		ma: store.NewScript("return 'ma'"), mb: store.NewScript("return 'mb'")}
	var calls []scriptCall
	add := func(s *store.Script, key string, args ...any) {
		calls = append(calls, scriptCall{Script: s, Keys: []string{key}, Args: args})
	}
	for i := range 130 {
		add(m.a, "a", int64(5), int64(1000+i/2)) // pairs of equal arguments
	}
	add(m.b, "b", int64(1))
	add(m.b, "b2", []byte("x")) // never taken as the same (nor compared)
	add(m.b, "b3", []byte("x"))
	add(m.c, "c1", int64(2))
	add(m.c, "c2", int64(2))
	var sc batchScratch
	packed, parts := sc.packMany(m, calls)
	// a: 64, 64, 2; b: 3; c: two alone
	wantSizes := []int{64, 64, 2, 3, 1, 1}
	if len(packed) != len(wantSizes) {
		t.Fatalf("%d calls, want %d", len(packed), len(wantSizes))
	}
	next := 0
	for k, p := range parts {
		if len(p.calls) != wantSizes[k] || p.many != (wantSizes[k] > 1) {
			t.Errorf("call %d carries %v (many %v), want %d calls", k, p.calls, p.many, wantSizes[k])
		}
		for _, j := range p.calls {
			if j != next {
				t.Errorf("call %d carries call %d, want %d (in order)", k, j, next)
			}
			next++
		}
	}
	first := callCmd(packed[0], false)
	if packed[0].Script != m.ma || first.Name != "EVALSHA" || first.Args[0] != m.ma.Hash() || first.Args[1] != 64 {
		t.Errorf("first call: %s %v, want ma's EVALSHA of 64 keys", first.Name, first.Args[:2])
	}
	// its arguments: 64 keys, then 32 pairs of {1, 2, rate, window} and {1, -1}
	a := first.Args[2+64:]
	if len(a) != 32*(4+2) || a[0] != 1 || a[1] != 2 || a[2] != int64(5) || a[3] != int64(1000) || a[4] != 1 || a[5] != -1 || a[8] != int64(5) || a[9] != int64(1001) {
		t.Errorf("first call's arguments after its keys: %v", a[:min(len(a), 12)])
	}
	if eval := callCmd(packed[0], true); eval.Name != "EVAL" || eval.Args[0] != m.ma.Source() || len(eval.Args) != len(first.Args) {
		t.Errorf("first call as EVAL: %s %v", eval.Name, eval.Args[:2])
	}
	// b's call: 3 keys, then {1, 1, 1}, {1, 1, "x"}, {1, 1, "x"}: the
	// []byte arguments sent each time
	if b := callCmd(packed[3], false).Args; packed[3].Script != m.mb || len(b) != 2+3+9 || b[6] != 1 || b[9] != 1 || b[12] != 1 {
		t.Errorf("b's call: %v", b)
	}
	if packed[4].Script != m.c || packed[5].Script != m.c || packed[4].Keys[0] != "c1" {
		t.Errorf("the c calls: %+v %+v", packed[4], packed[5])
	}
	checkPackedKeys(t, packed, parts, calls)

	// One script, the common batch, packed on the scratch of an earlier
	// batch: 64 and 6, each call with its own keys.
	sc.release()
	sc2 := batchScratches.Get().(*batchScratch)
	defer sc2.release()
	calls = calls[:70]
	for i := range calls {
		calls[i].Keys = []string{fmt.Sprintf("k%d", i)}
	}
	packed, parts = sc2.packMany(m, calls)
	if len(packed) != 2 || len(parts[0].calls) != 64 || len(parts[1].calls) != 6 || packed[1].Script != m.ma {
		t.Fatalf("one script: %d calls carrying %d and %d", len(packed), len(parts[0].calls), len(parts[len(parts)-1].calls))
	}
	checkPackedKeys(t, packed, parts, calls)
}

// checkPackedKeys checks that each packed call holds the keys of the calls
// it carries, in order: a packed call that shares its array with another
// and writes into it would show here.
func checkPackedKeys(t *testing.T, packed []scriptCall, parts []manyPart, calls []scriptCall) {
	t.Helper()
	for k, p := range parts {
		var want []string
		for _, j := range p.calls {
			want = append(want, calls[j].Keys...)
		}
		if !slices.Equal(packed[k].Keys, want) {
			t.Errorf("packed call %d has keys %v, want %v", k, packed[k].Keys, want)
		}
		if c := callCmd(packed[k], false); len(c.Args) != 2+len(want)+len(packed[k].Args) {
			t.Errorf("packed call %d: %d arguments for %d keys and %d arguments", k, len(c.Args), len(want), len(packed[k].Args))
		}
	}
}

// refusingBatcher answers each command of a batch by the next reply its
// answer function gives, recording the batches' commands.
type refusingBatcher struct {
	store.Store
	answer  func(c store.Cmd, nth int) store.Reply // nth: the nth send of this command's call
	sends   map[string]int                         // by the call's key
	batches [][]string                             // "EVALSHA k" or "EVAL k" per command
}

func (b *refusingBatcher) Batch(_ context.Context, cmds []store.Cmd) []store.Reply {
	out := make([]store.Reply, len(cmds))
	var names []string
	for i, c := range cmds {
		k := c.Args[2].(string)
		b.sends[k]++
		names = append(names, c.Name+" "+k)
		out[i] = b.answer(c, b.sends[k])
	}
	b.batches = append(b.batches, names)
	return out
}

func TestSendScriptsSendsAgainAfterTryAgain(t *testing.T) {
	s := store.NewScript("return 1")
	tryAgain := fmt.Errorf("x: %w", store.ErrTryAgain)
	calls := []scriptCall{{Script: s, Keys: []string{"ok"}}, {Script: s, Keys: []string{"split"}}, {Script: s, Keys: []string{"flushed"}}, {Script: s, Keys: []string{"both"}}}
	b := &refusingBatcher{sends: map[string]int{}, answer: func(c store.Cmd, nth int) store.Reply {
		switch k := c.Args[2].(string); {
		case k == "split" && nth <= 2, k == "both" && nth == 2:
			return store.Reply{Err: tryAgain}
		case k == "flushed" && nth == 1, k == "both" && nth == 1:
			return store.Reply{Err: fmt.Errorf("x: %w", store.ErrNoScript)}
		}
		return store.Reply{Val: c.Name}
	}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	replies := sendScripts(ctx, b, calls)
	want := "[{EVALSHA <nil>} {EVALSHA <nil>} {EVAL <nil>} {EVAL <nil>}]"
	if got := fmt.Sprint(replies); got != want {
		t.Errorf("replies = %s; want %s", got, want)
	}
	wantBatches := "[[EVALSHA ok EVALSHA split EVALSHA flushed EVALSHA both] [EVALSHA split EVAL flushed EVAL both] [EVALSHA split EVAL both]]"
	if got := fmt.Sprint(b.batches); got != wantBatches {
		t.Errorf("batches = %s; want %s", got, wantBatches)
	}
	// Refused until the deadline is too near for a pause: the call ends
	// with its TRYAGAIN, and the others are decided.
	b = &refusingBatcher{sends: map[string]int{}, answer: func(c store.Cmd, nth int) store.Reply {
		if c.Args[2] == "split" {
			return store.Reply{Err: tryAgain}
		}
		return store.Reply{Val: c.Name}
	}}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	replies = sendScripts(short, b, calls[:2])
	if replies[0].Val != "EVALSHA" || !errors.Is(replies[1].Err, store.ErrTryAgain) || b.sends["ok"] != 1 || b.sends["split"] < 2 {
		t.Errorf("refused until 50 ms: replies %v after sends %v; want ok decided once, split ErrTryAgain after a few sends", replies, b.sends)
	}
}

// TestSendInOrderKeepsASubjectsOrder: a call on a key of an earlier call
// goes in a later batch, so that the earlier one, refused for a moment and
// sent again, is not overtaken; a batch with no key named twice goes as
// one.
func TestSendInOrderKeepsASubjectsOrder(t *testing.T) {
	s := store.NewScript("return 1")
	tryAgain := fmt.Errorf("x: %w", store.ErrTryAgain)
	call := func(keys ...string) scriptCall { return scriptCall{Script: s, Keys: keys} }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name    string
		calls   []scriptCall
		batches string
	}{
		{"no key twice", []scriptCall{call("a:h", "a:d"), call("b:h"), call("c:d")},
			"[[EVALSHA a:h EVALSHA b:h EVALSHA c:d] [EVALSHA a:h]]"},
		// a:h is refused once (in every case): sent again before the
		// calls on its keys
		{"a subject three times", []scriptCall{call("a:h", "a:d"), call("a:d"), call("b:h"), call("a:h")},
			"[[EVALSHA a:h EVALSHA b:h] [EVALSHA a:h] [EVALSHA a:d EVALSHA a:h]]"},
		{"a chain of keys", []scriptCall{call("x"), call("x", "y"), call("y", "z"), call("w")},
			"[[EVALSHA x EVALSHA w] [EVALSHA x] [EVALSHA y]]"},
	} {
		b := &refusingBatcher{sends: map[string]int{}, answer: func(c store.Cmd, nth int) store.Reply {
			if c.Args[2] == "a:h" && nth == 1 {
				return store.Reply{Err: tryAgain}
			}
			return store.Reply{Val: c.Args[2]}
		}}
		replies := sendInOrder(ctx, b, tc.calls)
		if got := fmt.Sprint(b.batches); got != tc.batches {
			t.Errorf("%s: batches %s; want %s", tc.name, got, tc.batches)
		}
		for j, r := range replies {
			if r.Err != nil || r.Val != tc.calls[j].Keys[0] {
				t.Errorf("%s: call %d's reply %+v; want its own, %s", tc.name, j, r, tc.calls[j].Keys[0])
			}
		}
	}
}
