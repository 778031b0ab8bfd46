package rueidis_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/conformance"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	rueidisstore "github.com/quotagate/limiter/store/rueidis"
	"github.com/quotagate/limiter/strategy"
)

// newStore connects a Store with opt (the documented options when zero) to
// addr and closes it when the test ends.
func newStore(t testing.TB, addr string, edit func(*rueidis.ClientOption)) *rueidisstore.Store {
	t.Helper()
	opt := options(addr)
	opt.ForceSingleClient = true
	if edit != nil {
		edit(&opt)
	}
	return storeFor(t, opt)
}

// storeFor connects a Store with opt and closes it when the test ends.
func storeFor(t testing.TB, opt rueidis.ClientOption) *rueidisstore.Store {
	t.Helper()
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	st := rueidisstore.New(c)
	t.Cleanup(st.Close) // (run first)
	return st
}

// backends runs f on miniredis and on a redis-server (skipped without one,
// unless REQUIRE_REDIS=1).
func backends(t *testing.T, f func(t *testing.T, addr string)) {
	t.Run("miniredis", func(t *testing.T) { f(t, redistest.NewMini(t).Addr()) })
	t.Run("redis-server", func(t *testing.T) { f(t, redistest.StartServer(t).Addr()) })
}

func do1(t testing.TB, st store.Store, name string, args ...any) store.Reply {
	t.Helper()
	rs, err := st.Do(context.Background(), store.Cmd{Name: name, Args: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(rs) != 1 {
		t.Fatalf("%s: %d replies", name, len(rs))
	}
	return rs[0]
}

func TestNewNil(t *testing.T) {
	if st := rueidisstore.New(nil); st != nil {
		t.Fatalf("New(nil) = %v, want nil", st)
	}
	if _, err := limiter.New(rueidisstore.New(nil), strategy.NewFixedWindow()); !errors.Is(err, limiter.ErrNilStore) {
		t.Fatalf("limiter.New(New(nil)) = %v, want ErrNilStore", err)
	}
}

// Arguments of every supported type reach the server as Redis would write
// them, including many numbers in one call (more than one argument chunk).
func TestArgs(t *testing.T) {
	backends(t, func(t *testing.T, addr string) {
		st := newStore(t, addr, nil)
		args := []any{"s", []byte("b"), 7, int64(-1), int64(math.MaxInt64), int64(math.MinInt64),
			123456789, 1.5, 0.1, float64(1e21), int32(-300), uint64(math.MaxUint64), uint(5), true, false}
		want := []any{"s", "b", "7", "-1", "9223372036854775807", "-9223372036854775808",
			"123456789", "1.5", "0.1", "1000000000000000000000", "-300", "18446744073709551615", "5", "1", "0"}
		for i := range 40 { // enough numbers to fill several chunks
			args = append(args, int64(1e15)+int64(i))
			want = append(want, strconv.FormatInt(int64(1e15)+int64(i), 10))
		}
		r := do1(t, st, "RPUSH", append([]any{"{t}:list"}, args...)...)
		if r.Err != nil || r.Val != int64(len(args)) {
			t.Fatalf("RPUSH = %#v, %v", r.Val, r.Err)
		}
		r = do1(t, st, "LRANGE", "{t}:list", 0, -1)
		if r.Err != nil || !reflect.DeepEqual(r.Val, want) {
			t.Fatalf("LRANGE = %#v, %v; want %#v", r.Val, r.Err, want)
		}
		// The same through a script, whose arguments take the EVAL path.
		v, err := st.Eval(context.Background(), "return ARGV", []string{"{t}:k"}, args)
		if err != nil || !reflect.DeepEqual(v, want) {
			t.Fatalf("EVAL return ARGV = %#v, %v; want %#v", v, err, want)
		}
	})
}

// Script replies: nil is ErrNil as the error; a nested nil stays nil;
// NOSCRIPT is ErrNoScript; a script error is a plain server error.
func TestScriptReplies(t *testing.T) {
	backends(t, func(t *testing.T, addr string) {
		st := newStore(t, addr, nil)
		ctx := context.Background()
		if v, err := st.Eval(ctx, "return false", nil, nil); !errors.Is(err, store.ErrNil) || v != nil {
			t.Errorf("a nil script reply = %#v, %v; want nil, ErrNil", v, err)
		}
		v, err := st.Eval(ctx, "return {1, 'a', {}, -2}", nil, nil)
		if err != nil || !reflect.DeepEqual(v, []any{int64(1), "a", []any{}, int64(-2)}) {
			t.Errorf("an array reply = %#v, %v", v, err)
		}
		s := store.NewScript("return redis.call('INCRBY', KEYS[1], ARGV[1])")
		if _, err := st.EvalSha(ctx, s.Hash(), []string{"{t}:n"}, []any{2}); !errors.Is(err, store.ErrNoScript) {
			t.Errorf("EVALSHA of an unloaded script = %v, want ErrNoScript", err)
		}
		if v, err := s.Run(ctx, st, []string{"{t}:n"}, []any{2}); err != nil || v != int64(2) {
			t.Errorf("Script.Run = %#v, %v", v, err)
		}
		if v, err := st.EvalSha(ctx, s.Hash(), []string{"{t}:n"}, []any{int64(40)}); err != nil || v != int64(42) {
			t.Errorf("EVALSHA = %#v, %v", v, err)
		}
		_, err = st.Eval(ctx, "return redis.error_reply('ERR boom')", nil, nil)
		var re *rueidis.RedisError
		if err == nil || errors.Is(err, store.ErrNoScript) || errors.Is(err, store.ErrUnknownOutcome) || !errors.As(err, &re) {
			t.Errorf("a script error = %v; want the server's error, reachable as *rueidis.RedisError", err)
		}
	})
}

// RESP3 replies (maps, sets, doubles, booleans, big numbers, verbatim
// strings, nulls) are normalised like go-redis's: maps flattened (sorted by
// key; rueidis reads only string map keys: another is the reply's error),
// doubles and big numbers as text, booleans as 1 or 0.
func TestRESP3Replies(t *testing.T) {
	srv := redistest.StartServer(t, "--enable-debug-command", "yes")
	st := newStore(t, srv.Addr(), nil)
	for _, tc := range []struct {
		typ  string
		want any
	}{
		{"string", "Hello World"},
		{"integer", int64(12345)},
		{"double", "3.141"},
		{"bignum", "1234567999999999999999999999999999999"},
		{"true", int64(1)},
		{"false", int64(0)},
		{"verbatim", "This is a verbatim\nstring"},
		{"set", []any{int64(0), int64(1), int64(2)}},
	} {
		r := do1(t, st, "DEBUG", "PROTOCOL", tc.typ)
		got := r.Val
		if tc.typ == "map" { // Go map order: compare the pairs as a set
			got = sortedPairs(t, got)
		}
		if r.Err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("DEBUG PROTOCOL %s = %#v, %v; want %#v", tc.typ, r.Val, r.Err, tc.want)
		}
	}
	if r := do1(t, st, "DEBUG", "PROTOCOL", "null"); !errors.Is(r.Err, store.ErrNil) || r.Val != nil {
		t.Errorf("DEBUG PROTOCOL null = %#v, %v; want ErrNil", r.Val, r.Err)
	}
	// a map whose keys are integers, which rueidis does not parse: the
	// reply's error (it was an error value in Val, which the store
	// contract does not allow), from Do and from Eval
	if r := do1(t, st, "DEBUG", "PROTOCOL", "map"); r.Err == nil || r.Val != nil {
		t.Errorf("DEBUG PROTOCOL map = %#v, %v; want nil and an error", r.Val, r.Err)
	}
	if v, err := st.Eval(context.Background(), "redis.setresp(3); return {map={[1]=2, [3]=4}}", nil, nil); err == nil || v != nil {
		t.Errorf("a script's map with integer keys = %#v, %v; want nil and an error", v, err)
	}
	do1(t, st, "HSET", "{t}:h", "a", 1, "b", "x")
	if got := sortedPairs(t, do1(t, st, "HGETALL", "{t}:h").Val); !reflect.DeepEqual(got, []any{"a", "1", "b", "x"}) {
		t.Errorf("HGETALL = %#v", got)
	}
}

// sortedPairs sorts a flattened map reply by key.
func sortedPairs(t *testing.T, v any) []any {
	t.Helper()
	arr, err := store.Slice(v)
	if err != nil || len(arr)%2 != 0 {
		t.Fatalf("not a flattened map: %#v", v)
	}
	idx := make([]int, len(arr)/2)
	for i := range idx {
		idx[i] = 2 * i
	}
	slices.SortFunc(idx, func(a, b int) int {
		x, y := fmt.Sprint(arr[a]), fmt.Sprint(arr[b])
		if x < y {
			return -1
		} else if x > y {
			return 1
		}
		return 0
	})
	out := make([]any, 0, len(arr))
	for _, i := range idx {
		out = append(out, arr[i], arr[i+1])
	}
	return out
}

// A pipeline's per-command errors stay with their command.
func TestDoPipeline(t *testing.T) {
	backends(t, func(t *testing.T, addr string) {
		st := newStore(t, addr, nil)
		rs, err := st.Do(context.Background(),
			store.Cmd{Name: "set", Args: []any{"{t}:s", "v"}},
			store.Cmd{Name: "INCR", Args: []any{"{t}:s"}},
			store.Cmd{Name: "GET", Args: []any{"{t}:missing"}},
			store.Cmd{Name: "GET", Args: []any{"{t}:s"}},
		)
		if err != nil || len(rs) != 4 {
			t.Fatalf("Do = %v, %v", rs, err)
		}
		var re *rueidis.RedisError
		if rs[0].Val != "OK" || !errors.As(rs[1].Err, &re) || !errors.Is(rs[2].Err, store.ErrNil) || rs[3].Val != "v" {
			t.Errorf("replies = %+v", rs)
		}
		if rs, err := st.Do(context.Background()); err != nil || len(rs) != 0 {
			t.Errorf("Do() = %v, %v", rs, err)
		}
		if _, err := st.Do(context.Background(), store.Cmd{}); err == nil {
			t.Error("a command without a name: no error")
		}
		if _, err := st.Do(context.Background(), store.Cmd{Name: "SUBSCRIBE", Args: []any{"ch"}}); !errors.Is(err, store.ErrNotSupported) {
			t.Errorf("SUBSCRIBE = %v, want ErrNotSupported", err)
		}
	})
}

// A context already done sends nothing and is not an unknown outcome.
func TestContextDoneBeforeSending(t *testing.T) {
	m := redistest.NewMini(t)
	p := redistest.NewProxy(t, m.Addr())
	st := newStore(t, p.Addr(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.ResetCounts()
	_, err := st.EvalSha(ctx, strategy.FixedWindowScript().Hash(), []string{"k"}, []any{1})
	if !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("EvalSha with a cancelled context = %v; want Canceled, not ErrUnknownOutcome", err)
	}
	_, err = st.Do(ctx, store.Cmd{Name: "INCR", Args: []any{"k"}})
	if !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("Do with a cancelled context = %v; want Canceled, not ErrUnknownOutcome", err)
	}
	err = st.Watch(ctx, []string{"k"}, func(store.Tx) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Watch with a cancelled context = %v; want Canceled", err)
	}
	_, err = st.EvalShaInt64s(ctx, strategy.FixedWindowScript().Hash(), []string{"k"}, []int64{1}, nil)
	if !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("EvalShaInt64s with a cancelled context = %v; want Canceled, not ErrUnknownOutcome", err)
	}
	for i, r := range st.Batch(ctx, []store.Cmd{{Name: "INCR", Args: []any{"k"}}, {Name: "INCR", Args: []any{"k2"}}}) {
		if !errors.Is(r.Err, context.Canceled) || errors.Is(r.Err, store.ErrUnknownOutcome) {
			t.Errorf("Batch with a cancelled context: reply %d = %v; want Canceled, not ErrUnknownOutcome", i, r.Err)
		}
	}
	if n := p.Commands(); n["EVALSHA"]+n["INCR"]+n["WATCH"] != 0 {
		t.Errorf("commands reached the server: %v", n)
	}
}

// With Redis down, a call that could not even connect is a plain error: it
// sent nothing, so the outcome is known.
func TestRedisDownIsNotUnknownOutcome(t *testing.T) {
	m := redistest.NewMini(t)
	st := newStore(t, m.Addr(), nil)
	if r := do1(t, st, "PING"); r.Val != "PONG" {
		t.Fatalf("PING = %#v", r)
	}
	m.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := st.Do(context.Background(), store.Cmd{Name: "INCR", Args: []any{"k"}})
		if err == nil {
			t.Fatal("INCR with Redis down: no error")
		}
		if !errors.Is(err, store.ErrUnknownOutcome) {
			break // the dial error
		}
		if time.Now().After(deadline) {
			t.Fatalf("every call with Redis down is an unknown outcome: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// With rueidis's defaults (retries on, no AlwaysPipelining, several lazily
// dialled connections; but for its background PING, which can race the
// start of a connection's background reader and crash the process, see
// the package documentation) a lost reply is still counted once and a dead Redis
// still follows the fail mode: the documented options are for availability
// and determinism, not for the guarantee. (Property 20 is left out: with
// lazily dialled connections its slow call may be the first on a new
// connection, whose handshake the proxy delays too, so that the EVALSHA is
// never sent; the adapter then rightly reports an unknown outcome, but the
// check counts on the call having run.)
func TestDefaultsLostReplyAndRedisDown(t *testing.T) {
	dial := func(_ context.Context, addr string) (store.Store, func(), error) {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true, Dialer: net.Dialer{KeepAlive: -1, KeepAliveConfig: net.KeepAliveConfig{Enable: true}}})
		if err != nil {
			return nil, nil, err
		}
		st := rueidisstore.New(c)
		return st, func() { st.Close(); c.Close() }, nil
	}
	for _, name := range []string{"lost-reply-counted-once", "redis-down-or-blackholed"} {
		ch, ok := conformance.CheckByName(name)
		if !ok {
			t.Fatalf("no check %q", name)
		}
		t.Run(name+"/miniredis", func(t *testing.T) {
			conformance.RunCheck(t, conformance.Miniredis(dial), conformance.FixedWindow(), ch)
		})
		t.Run(name+"/redis-server", func(t *testing.T) {
			conformance.RunCheck(t, conformance.RedisServer(dial), conformance.FixedWindow(), ch)
		})
	}
}

// TestRestartWithoutAlwaysPipeliningFailsNoScript: without
// AlwaysPipelining a connection used by one caller at a time has no reader,
// so the first call after every restart is written into the closed
// connection and fails as an unknown outcome: property 16 (a restart is
// invisible) fails it, though it tries the restart 3 times.
func TestRestartWithoutAlwaysPipeliningFailsNoScript(t *testing.T) {
	dial := dialWith(func(opt *rueidis.ClientOption) { opt.AlwaysPipelining = false })
	ch, ok := conformance.CheckByName("noscript-invisible")
	if !ok {
		t.Fatal("no check noscript-invisible")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := conformance.Run(ctx, conformance.RedisServer(dial), []conformance.Spec{conformance.FixedWindow()}, []conformance.Check{ch}, false)
	if len(out) != 1 {
		t.Fatalf("%d outcomes, want 1: %+v", len(out), out)
	}
	msgs := strings.Join(out[0].Messages, " | ")
	t.Log(msgs)
	if out[0].Skipped || out[0].Passed || !strings.Contains(msgs, "first call after restart 3") {
		t.Errorf("noscript-invisible without AlwaysPipelining: skipped=%v passed=%v; want failed after 3 restarts: %s", out[0].Skipped, out[0].Passed, msgs)
	}
}
