package conformance

import (
	_ "embed"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

var (
	//go:embed lua/store_echo.lua
	echoLua string
	//go:embed lua/store_error.lua
	errorLua string
	//go:embed lua/store_ints.lua
	intsLua string
	//go:embed lua/expire_time.lua
	expireTimeLua    string
	expireTimeScript = store.NewScript(expireTimeLua)
)

// StoreCheck is one check of the store contract itself.
type StoreCheck struct {
	// Name is a short slug, used as the subtest name.
	Name string
	// Scripts: the check runs Lua, which a server or an ACL that refuses
	// scripts refuses (limiter.ServerReport.Scripting false): it cannot
	// run there.
	Scripts bool
	run     func(c *checker)
}

// StoreChecks returns the checks of the store contract.
func StoreChecks() []StoreCheck {
	return []StoreCheck{
		{Name: "replies-normalised", run: checkReplies},
		{Name: "scripts-and-noscript", Scripts: true, run: checkScripts},
		{Name: "integer-scripts", Scripts: true, run: checkIntScripts},
		{Name: "batch-per-command", Scripts: true, run: checkBatch},
		{Name: "conn-commands-refused", Scripts: true, run: checkConnCommands},
		{Name: "do-one-round-trip", run: checkDoOneRoundTrip},
	}
}

// StoreCheckByName returns the store check of that name.
func StoreCheckByName(name string) (StoreCheck, bool) {
	for _, sc := range StoreChecks() {
		if sc.Name == name {
			return sc, true
		}
	}
	return StoreCheck{}, false
}

// RunStoreCheck runs one store check on a fresh harness from mk.
func RunStoreCheck(t testing.TB, mk HarnessMaker, sc StoreCheck) {
	t.Helper()
	c := newChecker(t, mk, FixedWindow())
	if !c.h.Caps().Private {
		t.Cleanup(c.deleteKeys) // a check that stops half-way leaves none
	}
	sc.run(c)
}

// Replies are normalised: int64, string, []any, ErrNil; a Redis error reply
// belongs to its command and leaves the rest of the pipeline alone.
// Arguments of every documented type reach Redis as their decimal text (a
// float64 of 10^6 as "1000000", which Redis reads as an integer), in a
// pipeline and in a command alone, through Do and Batch.
func checkReplies(c *checker) {
	k := c.prefix + ":{s}:"
	rs, err := c.h.Store().Do(c.ctx,
		store.Cmd{Name: "SET", Args: []any{k + "str", "v"}},
		store.Cmd{Name: "GET", Args: []any{k + "str"}},
		store.Cmd{Name: "GET", Args: []any{k + "missing"}},
		store.Cmd{Name: "INCRBY", Args: []any{k + "str", 1}},
		store.Cmd{Name: "INCRBY", Args: []any{k + "n", int64(5)}},
		store.Cmd{Name: "RPUSH", Args: []any{k + "list", "a", "b"}},
		store.Cmd{Name: "LRANGE", Args: []any{k + "list", 0, -1}},
		store.Cmd{Name: "SET", Args: []any{k + "f", float64(1e6), "PX", float64(60000)}},
		store.Cmd{Name: "GET", Args: []any{k + "f"}},
		store.Cmd{Name: "DEL", Args: []any{k + "str", k + "n", k + "list", k + "f"}},
	)
	if err != nil {
		c.t.Fatalf("store: Do: %v", err)
	}
	if len(rs) != 10 {
		c.t.Fatalf("store: Do returned %d replies for 10 commands", len(rs))
	}
	want := []any{"OK", "v", nil, nil, int64(5), int64(2), []any{"a", "b"}, "OK", "1000000", int64(4)}
	for i, w := range want {
		if i == 2 || i == 3 {
			continue
		}
		if rs[i].Err != nil || !reflect.DeepEqual(rs[i].Val, w) {
			c.t.Errorf("store: reply %d = %#v, %v; want %#v", i, rs[i].Val, rs[i].Err, w)
		}
	}
	if !errors.Is(rs[2].Err, store.ErrNil) || rs[2].Val != nil {
		c.t.Errorf("store: GET of a missing key = %#v, %v; want nil, ErrNil", rs[2].Val, rs[2].Err)
	}
	if rs[3].Err == nil || errors.Is(rs[3].Err, store.ErrNil) {
		c.t.Errorf("store: INCRBY of a string = %#v, %v; want the server's error reply", rs[3].Val, rs[3].Err)
	}
	// A command alone, through Do and through Batch, takes the same
	// arguments (an adapter may send it on another path).
	one := func(f string) store.Cmd {
		return store.Cmd{Name: "SET", Args: []any{k + f, float64(1e6), "PX", float64(60000)}}
	}
	if rs, err := c.h.Store().Do(c.ctx, one("f1")); err != nil || rs[0].Err != nil {
		c.t.Errorf("store: Do of a SET with float64 arguments alone = %+v, %v; want OK", rs, err)
	}
	if b, ok := c.h.Store().(store.Batcher); ok {
		if rs := b.Batch(c.ctx, []store.Cmd{one("f2")}); rs[0].Err != nil {
			c.t.Errorf("store: Batch of a SET with float64 arguments alone = %+v; want OK", rs)
		}
	} else if _, err := c.h.Store().Do(c.ctx, one("f2")); err != nil {
		c.t.Fatalf("store: Do: %v", err)
	}
	rs, err = c.h.Store().Do(c.ctx,
		store.Cmd{Name: "GET", Args: []any{k + "f1"}},
		store.Cmd{Name: "GET", Args: []any{k + "f2"}},
		store.Cmd{Name: "DEL", Args: []any{k + "f1", k + "f2"}})
	if err != nil || rs[0].Val != "1000000" || rs[1].Val != "1000000" {
		c.t.Errorf("store: the values SET alone = %+v, %v; want \"1000000\" twice", rs, err)
	}
}

// EVALSHA of an unknown script is ErrNoScript; Script.Run falls back to
// EVAL; script replies are normalised; a script's error is not NOSCRIPT.
func checkScripts(c *checker) {
	st := c.h.Store()
	k := c.prefix + ":{s}:k"
	s := store.NewScript(echoLua)
	if _, err := st.EvalSha(c.ctx, "0000000000000000000000000000000000000000", []string{k}, []any{"x"}); !errors.Is(err, store.ErrNoScript) {
		c.t.Errorf("store: EVALSHA of an unknown script = %v, want ErrNoScript", err)
	}
	v, err := s.Run(c.ctx, st, []string{k}, []any{"x"})
	want := []any{int64(1), "x", []any{int64(2), "x"}}
	if err != nil || !reflect.DeepEqual(v, want) {
		c.t.Errorf("store: Script.Run = %#v, %v; want %#v", v, err, want)
	}
	v, err = st.EvalSha(c.ctx, s.Hash(), []string{k}, []any{"y"})
	if err != nil || !reflect.DeepEqual(v, []any{int64(1), "y", []any{int64(2), "y"}}) {
		c.t.Errorf("store: EVALSHA of a cached script = %#v, %v", v, err)
	}
	bad := store.NewScript(errorLua)
	if _, err := bad.Run(c.ctx, st, []string{k}, nil); err == nil || errors.Is(err, store.ErrNoScript) || errors.Is(err, store.ErrUnknownOutcome) {
		c.t.Errorf("store: a script's error reply = %v; want a plain server error", err)
	}
	if rs, err := st.Do(c.ctx, store.Cmd{Name: "DEL", Args: []any{k}}); err != nil || rs[0].Err != nil {
		c.t.Errorf("store: DEL: %v", err)
	}
}

// Script.RunInt64s, the path of integer scripts (a store.Int64sEvaler's or
// the generic one), passes integer arguments exactly, appends the reply to
// dst (an array's integers, or an integer reply as one value), and reads a reply element that is not an integer (nil, text) or an
// error reply as an error, never as 0. An Int64sEvaler's EVALSHA of an
// unknown script is ErrNoScript, so the fallback works.
func checkIntScripts(c *checker) {
	st := c.h.Store()
	k := c.prefix + ":{s}:ints"
	// The script's first call must meet NOSCRIPT and fall back, even on a
	// shared server that ran this check before and keeps its script cache:
	// a comment with the run's random prefix makes it a script of its own.
	s := store.NewScript("-- " + c.prefix + "\n" + intsLua)
	args := []int64{0, 7, 99, 100, -5, 1 << 40, 1 << 50}
	dst := make([]int64, 1, 16)
	dst[0] = 42
	got, err := s.RunInt64s(c.ctx, st, []string{k, k + "2"}, args, dst)
	want := append([]int64{42, 2}, args...)
	if err != nil || !reflect.DeepEqual(got, want) {
		c.t.Errorf("store: Script.RunInt64s = %v, %v; want %v (dst's 42 kept, then the reply)", got, err, want)
	} else if &got[0] != &dst[0] {
		c.t.Errorf("store: Script.RunInt64s did not append to dst, which had room")
	}
	for _, mode := range []int64{-1, -2} {
		got, err := s.RunInt64s(c.ctx, st, []string{k}, []int64{mode}, nil)
		if err == nil {
			c.t.Errorf("store: an integer script's reply {1, %s, 2} = %v, nil error; want an error, not a made-up integer",
				map[int64]string{-1: "nil", -2: `"x"`}[mode], got)
		}
	}
	for _, n := range []int64{7, -9, 1 << 50} {
		got, err := s.RunInt64s(c.ctx, st, []string{k}, []int64{-4, n}, dst[:1])
		if err != nil || !reflect.DeepEqual(got, []int64{42, n}) {
			c.t.Errorf("store: an integer script's integer reply %d = %v, %v; want [42 %d] (one value, appended)", n, got, err, n)
		}
	}
	if got, err := s.RunInt64s(c.ctx, st, []string{k}, []int64{-5}, nil); err == nil {
		c.t.Errorf("store: an integer script's reply \"x\" = %v, nil error; want an error", got)
	}
	_, err = s.RunInt64s(c.ctx, st, []string{k}, []int64{-3}, nil)
	if err == nil || errors.Is(err, store.ErrNoScript) || errors.Is(err, store.ErrUnknownOutcome) {
		c.t.Errorf("store: an integer script's error reply = %v; want a plain server error", err)
	}
	if ev, ok := st.(store.Int64sEvaler); ok {
		if _, err := ev.EvalShaInt64s(c.ctx, "0000000000000000000000000000000000000000", []string{k}, args, nil); !errors.Is(err, store.ErrNoScript) {
			c.t.Errorf("store: EvalShaInt64s of an unknown script = %v, want ErrNoScript", err)
		}
	}
}

// A store.Batcher's Batch gives each command its own reply, whatever the
// others are: keys of several subjects (several Cluster slots), commands
// without arguments (PING) and without keys (EVAL of no keys), an error
// reply, a nil reply. No command's error is another's. Skipped for a store
// that is not a Batcher.
func checkBatch(c *checker) {
	b, ok := c.h.Store().(store.Batcher)
	if !ok {
		c.t.Skip("the store is not a store.Batcher")
	}
	k := c.prefix + ":"
	keys := []string{k + "{a}n", k + "{b}n", k + "{c}s", k + "{d}missing"}
	cmds := []store.Cmd{
		{Name: "INCRBY", Args: []any{keys[0], 2}},
		{Name: "PING"},
		{Name: "SET", Args: []any{keys[2], "text", "PX", 60000}},
		{Name: "INCRBY", Args: []any{keys[1], 3}},
		{Name: "EVAL", Args: []any{"return 7", 0}},
		{Name: "INCRBY", Args: []any{keys[2], 1}}, // an error reply: not an integer
		{Name: "GET", Args: []any{keys[3]}},
		{Name: "PEXPIRE", Args: []any{keys[0], 60000}},
		{Name: "PEXPIRE", Args: []any{keys[1], 60000}},
	}
	rs := b.Batch(c.ctx, cmds)
	if len(rs) != len(cmds) {
		c.t.Fatalf("store: Batch returned %d replies for %d commands", len(rs), len(cmds))
	}
	want := []any{int64(2), "PONG", "OK", int64(3), int64(7), nil, nil, int64(1), int64(1)}
	for i, w := range want {
		switch i {
		case 5:
			if rs[i].Err == nil || errors.Is(rs[i].Err, store.ErrNil) || errors.Is(rs[i].Err, store.ErrUnknownOutcome) {
				c.t.Errorf("store: Batch: INCRBY of a string = %#v, %v; want the server's error reply", rs[i].Val, rs[i].Err)
			}
		case 6:
			if !errors.Is(rs[i].Err, store.ErrNil) || rs[i].Val != nil {
				c.t.Errorf("store: Batch: GET of a missing key = %#v, %v; want nil, ErrNil", rs[i].Val, rs[i].Err)
			}
		default:
			if rs[i].Err != nil || !reflect.DeepEqual(rs[i].Val, w) {
				c.t.Errorf("store: Batch: %s = %#v, %v; want %#v (its own reply, whatever the others' are)", cmds[i].Name, rs[i].Val, rs[i].Err, w)
			}
		}
	}
	for _, key := range keys[:3] {
		if rs, err := c.h.Store().Do(c.ctx, store.Cmd{Name: "DEL", Args: []any{key}}); err != nil || rs[0].Err != nil {
			c.t.Errorf("store: DEL %s: %v", key, err)
		}
	}
}

// A command that changes the state of a connection other calls share or
// reuse (a lone MULTI, WATCH, SUBSCRIBE, SELECT, CLIENT REPLY, inside a
// transaction too) is refused before it is sent, with an error wrapping
// store.ErrNotSupported: in Do, the call; in Batch, that command alone,
// the others answered; in a Watch's Tx, the Tx's call (WATCH and UNWATCH
// but in Exec allowed). Decisions after the refusals are exact (a lone
// MULTI that went out would have other calls' commands queued, told they
// failed, and run by a later EXEC; a SELECT, counted in another
// database).
func checkConnCommands(c *checker) {
	st := c.h.Store()
	k := c.prefix + ":{conn}:k"
	lim := c.limiter(nil)
	l := limiter.PerHour(100)
	decide := func(want int64) {
		c.t.Helper()
		if r, err := lim.Allow(c.ctx, "conn", l); err != nil || !r.Allowed || r.Remaining != want {
			c.t.Fatalf("store: Allow after the refused calls = %+v, %v; want admitted with %d remaining", r, err, want)
		}
	}
	decide(99)
	for _, cmds := range [][]store.Cmd{
		{{Name: "MULTI"}},
		{{Name: "multi"}},
		{{Name: "EXEC"}},
		{{Name: "DISCARD"}},
		{{Name: "WATCH", Args: []any{k}}},
		{{Name: "UNWATCH"}},
		{{Name: "SUBSCRIBE", Args: []any{c.prefix}}},
		{{Name: "PSUBSCRIBE", Args: []any{c.prefix + "*"}}},
		{{Name: "MONITOR"}},
		{{Name: "GET", Args: []any{k}}, {Name: "MULTI"}},
		{{Name: "MULTI"}, {Name: "GET", Args: []any{k}}},
		{{Name: "SELECT", Args: []any{1}}},
		{{Name: "select", Args: []any{0}}},
		{{Name: "RESET"}},
		{{Name: "HELLO", Args: []any{2}}},
		{{Name: "AUTH", Args: []any{"nobody", "nothing"}}},
		{{Name: "CLIENT", Args: []any{"REPLY", "OFF"}}},
		{{Name: "CLIENT", Args: []any{"TRACKING", "ON"}}},
		{{Name: "READONLY"}},
		{{Name: "QUIT"}},
		{{Name: "MULTI"}, {Name: "SELECT", Args: []any{1}}, {Name: "EXEC"}},
		{{Name: "MULTI"}, {Name: "SUBSCRIBE", Args: []any{c.prefix}}, {Name: "EXEC"}},
	} {
		if rs, err := st.Do(c.ctx, cmds...); !errors.Is(err, store.ErrNotSupported) {
			c.t.Errorf("store: Do%v = %v, %v; want an error wrapping store.ErrNotSupported, nothing sent", cmds, rs, err)
		}
	}
	if w, ok := st.(store.Watcher); ok {
		// A Watch's connection goes back to its pool after it: its Tx
		// refuses alike (WATCH and UNWATCH, but in Exec, allowed).
		refused := func(step string, rs []store.Reply, err error) {
			c.t.Helper()
			if !errors.Is(err, store.ErrNotSupported) {
				c.t.Errorf("store: in a Watch, %s = %v, %v; want an error wrapping store.ErrNotSupported, nothing sent", step, rs, err)
			}
		}
		err := w.Watch(c.ctx, []string{k}, func(tx store.Tx) error {
			rs, err := tx.Do(c.ctx, store.Cmd{Name: "MULTI"})
			refused("Tx.Do(MULTI)", rs, err)
			rs, err = tx.Do(c.ctx, store.Cmd{Name: "GET", Args: []any{k}}, store.Cmd{Name: "SELECT", Args: []any{1}})
			refused("Tx.Do(GET, SELECT 1)", rs, err)
			rs, err = tx.Exec(c.ctx, store.Cmd{Name: "SUBSCRIBE", Args: []any{c.prefix}})
			refused("Tx.Exec(SUBSCRIBE)", rs, err)
			rs, err = tx.Exec(c.ctx, store.Cmd{Name: "WATCH", Args: []any{k}})
			refused("Tx.Exec(WATCH)", rs, err)
			if rs, err = tx.Do(c.ctx, store.Cmd{Name: "WATCH", Args: []any{k}}); err != nil || len(rs) != 1 || rs[0].Err != nil {
				c.t.Errorf("store: in a Watch, Tx.Do(WATCH) = %v, %v; want OK (the Watch watches one key more)", rs, err)
			}
			return nil
		})
		if err != nil {
			c.t.Errorf("store: Watch of the refused calls: %v", err)
		}
	}
	if b, ok := st.(store.Batcher); ok {
		rs := b.Batch(c.ctx, []store.Cmd{{Name: "INCR", Args: []any{k}}, {Name: "MULTI"}, {Name: "INCR", Args: []any{k}}, {Name: "WATCH", Args: []any{k}}})
		if len(rs) != 4 || rs[0].Err != nil || rs[0].Val != int64(1) || rs[2].Err != nil || rs[2].Val != int64(2) ||
			!errors.Is(rs[1].Err, store.ErrNotSupported) || !errors.Is(rs[3].Err, store.ErrNotSupported) {
			c.t.Errorf("store: Batch(INCR, MULTI, INCR, WATCH) = %+v; want 1, ErrNotSupported, 2, ErrNotSupported", rs)
		}
	}
	for i := range int64(3) {
		decide(98 - i)
	}
	// A whole transaction goes through.
	tx, err := st.Do(c.ctx, store.Cmd{Name: "MULTI"}, store.Cmd{Name: "SET", Args: []any{k, 7}}, store.Cmd{Name: "DEL", Args: []any{k}}, store.Cmd{Name: "EXEC"})
	if err != nil || len(tx) != 4 || tx[3].Err != nil {
		c.t.Fatalf("store: Do(MULTI, SET, DEL, EXEC) = %+v, %v; want the transaction's replies", tx, err)
	}
	if vals, _ := tx[3].Val.([]any); len(vals) != 2 || vals[1] != int64(1) {
		c.t.Errorf("store: EXEC's replies = %v; want [OK 1]", tx[3].Val)
	}
}

// Do sends its commands in one round trip (a pipeline): through a proxy
// that holds every reply 200 ms, ten commands take about 200 ms, not ten
// times that.
func checkDoOneRoundTrip(c *checker) {
	p, st := c.proxied()
	k := c.prefix + ":{rt}:k"
	cmds := make([]store.Cmd, 10)
	for i := range cmds {
		cmds[i] = store.Cmd{Name: "INCR", Args: []any{k}}
	}
	if _, err := st.Do(c.ctx, store.Cmd{Name: "PING"}); err != nil { // connected first
		c.t.Fatalf("store: PING through the proxy: %v", err)
	}
	const delay = 200 * time.Millisecond
	p.Delay(delay)
	start := time.Now()
	rs, err := st.Do(c.ctx, cmds...)
	took := time.Since(start)
	p.Delay(0)
	if err != nil || len(rs) != len(cmds) || rs[len(rs)-1].Val != int64(len(cmds)) {
		c.t.Fatalf("store: Do of %d INCRs = %v, %v", len(cmds), rs, err)
	}
	// (3 round trips' time: room for a loaded machine; one per command
	// would take 10)
	if took >= 3*delay {
		c.t.Errorf("store: Do of %d commands took %s with each reply held %s: not one round trip", len(cmds), took.Round(time.Millisecond), delay)
	}
	if rs, err := st.Do(c.ctx, store.Cmd{Name: "DEL", Args: []any{k}}); err != nil || rs[0].Err != nil {
		c.t.Fatalf("DEL %s: %v %v", k, err, rs)
	}
}
