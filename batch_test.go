package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/storetest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// TestAllowMany: 16 decisions of different subjects, costs and limits go
// in one batch and are each what AllowN would say; a bad ask is its own
// error and sends nothing; after SCRIPT FLUSH the batch is sent once more
// as EVAL, counting once; denials go to the deny cache and come back from
// it without a command; the observer hears each decision. On one server
// (store.OneServer) the batch is one call of FixedWindow's many-request
// script; otherwise one call per ask.
func TestAllowMany(t *testing.T) {
	t.Run("one-server", func(t *testing.T) { testAllowMany(t, true) })
	t.Run("pipelined", func(t *testing.T) { testAllowMany(t, false) })
}

func testAllowMany(t *testing.T, one bool) {
	m, st := newMiniFastFail(t)
	bc := &storetest.Batches{Store: st, One: one}
	obs := &tally{}
	lim, err := limiter.New(bc, strategy.NewFixedWindow(), limiter.WithDenyCache(64), limiter.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	perMin, perHour := limiter.PerMinute(3), limiter.PerHour(4)
	var asks []limiter.Ask
	for i := range 16 {
		// costs 1, 1, 2, 2, ...: asks under the same limits and cost
		// side by side, whose arguments a many-request call sends once
		a := limiter.Ask{Key: fmt.Sprintf("s%d", i), Cost: int64(1 + i/2%2), Limits: []limiter.Limit{perMin}}
		if i%4 == 3 {
			a.Limits = append(a.Limits, perHour)
		}
		asks = append(asks, a)
	}
	asks = append(asks, limiter.Ask{Key: "bad", Cost: -2, Limits: []limiter.Limit{perMin}}, limiter.Ask{Key: "bad1", Cost: -1, Limits: []limiter.Limit{perMin}})
	// remaining after round r for cost c against 3/min (and 4/h)
	for round := range 3 {
		if round == 1 {
			if rs, err := st.Do(ctx, store.Cmd{Name: "SCRIPT", Args: []any{"FLUSH"}}); err != nil || rs[0].Err != nil {
				t.Fatalf("SCRIPT FLUSH: %v %v", rs, err)
			}
		}
		before, beforeCmds := bc.BatchCount(), bc.CmdCount()
		answers := lim.AllowMany(ctx, asks)
		if len(answers) != len(asks) {
			t.Fatalf("%d answers to %d asks", len(answers), len(asks))
		}
		for i, a := range asks[:16] {
			used := a.Cost * int64(round+1)
			allowed := used <= 3
			got := answers[i]
			if got.Err != nil || got.Result.Allowed != allowed {
				t.Fatalf("round %d, ask %d (%s cost %d): %+v, %v; want allowed %v", round, i, a.Key, a.Cost, got.Result, got.Err, allowed)
			}
			if allowed && got.Result.Remaining != min(3-used, 4-used) && len(a.Limits) == 2 || allowed && len(a.Limits) == 1 && got.Result.Remaining != 3-used {
				t.Errorf("round %d, ask %d: remaining %d", round, i, got.Result.Remaining)
			}
			if !allowed && (got.Result.RetryAfter <= 0 || got.Result.Limit != perMin) {
				t.Errorf("round %d, ask %d: denial %+v; want perMin binding with a RetryAfter", round, i, got.Result)
			}
		}
		for _, bad := range answers[16:] {
			if !errors.Is(bad.Err, limiter.ErrInvalidCost) {
				t.Errorf("round %d: bad ask: %+v, %v; want ErrInvalidCost", round, bad.Result, bad.Err)
			}
		}
		// round 2: the asks of cost 2, denied in round 1, are answered by
		// the deny cache
		wantBatches, wantCmds := int64(1), int64(8)
		switch {
		case one:
			wantCmds = 1
		case round < 2:
			wantCmds = 16
		}
		if round < 2 {
			// EVALSHA, then EVAL after NOSCRIPT (a new server; a flushed one)
			wantBatches, wantCmds = 2, 2*wantCmds
		}
		if n, c := bc.BatchCount()-before, bc.CmdCount()-beforeCmds; n != wantBatches || c != wantCmds {
			t.Errorf("round %d: %d batches of %d commands, want %d of %d", round, n, c, wantBatches, wantCmds)
		}
	}
	if m.Exists("limiter:{bad}:60000ms") || m.Exists("limiter:{bad1}:60000ms") {
		t.Error("a bad ask wrote its key")
	}
	// Round 3: the cost-2 subjects were denied in round 1 and 2 and are in
	// the deny cache: only the cost-1 subjects reach Redis.
	before := bc.CmdCount()
	answers := lim.AllowMany(ctx, asks[:16])
	cached := 0
	for i, a := range answers {
		if a.Err != nil || a.Result.Allowed {
			t.Fatalf("round 3, ask %d: %+v, %v; want denied", i, a.Result, a.Err)
		}
		if a.Result.Cached {
			cached++
		}
	}
	wantSent := int64(8)
	if one {
		wantSent = 1 // the 8 asks in one call
	}
	if sent := bc.CmdCount() - before; cached != 8 || sent != wantSent {
		t.Errorf("round 3: %d answered from the deny cache and %d commands sent; want 8 and %d", cached, sent, wantSent)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	// (the two bad asks' errors in each of the 3 rounds)
	if want := 3*16 + 16; obs.decisions != want || obs.errors != 6 {
		t.Errorf("observer: %d decisions and %d errors, want %d and 6", obs.decisions, obs.errors, want)
	}
}

// TestAllowManyFailModes: with Redis gone every decision of a batch
// follows the fail mode on its own (an error, a Degraded admission or
// denial), and a bad ask is still its sentinel error.
func TestAllowManyFailModes(t *testing.T) {
	m, st := newMiniFastFail(t)
	m.Close()
	asks := []limiter.Ask{
		{Key: "a", Limits: []limiter.Limit{limiter.PerMinute(3)}},
		{Key: "b", Cost: 2, Limits: []limiter.Limit{limiter.PerHour(3)}},
		{Key: "", Limits: []limiter.Limit{limiter.PerMinute(3)}},
	}
	for _, mode := range []limiter.FailMode{limiter.FailError, limiter.FailOpen, limiter.FailClosed} {
		lim, err := limiter.New(st, strategy.NewGCRA(), limiter.WithFailMode(mode), limiter.WithTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		answers := lim.AllowMany(context.Background(), asks)
		for i, a := range answers[:2] {
			switch mode {
			case limiter.FailError:
				if a.Err == nil {
					t.Errorf("%v, ask %d: %+v; want an error", mode, i, a.Result)
				}
			default:
				if a.Err != nil || !a.Result.Degraded || a.Result.Allowed != (mode == limiter.FailOpen) {
					t.Errorf("%v, ask %d: %+v, %v; want a Degraded decision", mode, i, a.Result, a.Err)
				}
			}
		}
		if !errors.Is(answers[2].Err, limiter.ErrInvalidKey) {
			t.Errorf("%v: the empty key: %v; want ErrInvalidKey", mode, answers[2].Err)
		}
	}
}

// TestAllowManyWithoutScripts: a strategy that is not one script
// (Bucketed: a transaction) decides each ask with its own call, and a
// batch is exact all the same.
func TestAllowManyWithoutScripts(t *testing.T) {
	_, st := newMiniFastFail(t)
	lim, err := limiter.New(st, strategy.NewBucketed())
	if err != nil {
		t.Fatal(err)
	}
	l := limiter.PerHour(5)
	asks := make([]limiter.Ask, 40)
	for i := range asks {
		asks[i] = limiter.Ask{Key: fmt.Sprintf("k%d", i%4), Limits: []limiter.Limit{l}}
	}
	admitted := map[string]int{}
	for i, a := range lim.AllowMany(context.Background(), asks) {
		if a.Err != nil {
			t.Fatalf("ask %d: %v", i, a.Err)
		}
		if a.Result.Allowed {
			admitted[asks[i].Key]++
		}
	}
	for k, n := range admitted {
		if n != 5 {
			t.Errorf("%s: %d admitted of 10 asks against 5 per hour", k, n)
		}
	}
	if len(admitted) != 4 {
		t.Errorf("admitted %v; want 4 subjects", admitted)
	}
}

// TestWhichStrategiesBatch: AllowMany's doc and the README name the
// strategies whose decisions go in one batch (on one server, in one call of
// a many-request script) and those decided one call per ask; this keeps
// both lists true, by counting what 16 asks send.
func TestWhichStrategiesBatch(t *testing.T) {
	for _, tc := range []struct {
		name    string
		s       limiter.Strategy
		batches bool
	}{
		{"FixedWindow", strategy.NewFixedWindow(), true},
		{"GCRA", strategy.NewGCRA(), true},
		{"TokenBucket", strategy.NewTokenBucket(), true},
		{"SlidingWindow", strategy.NewSlidingWindow(), true},
		{"SlidingLog", strategy.NewSlidingLog(), true},
		{"AlignedWindow", strategy.NewAlignedWindow(), true},
		{"Bucketed", strategy.NewBucketed(), false},
		{"Optimistic", strategy.NewOptimistic(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, st := newMiniFastFail(t)
			bc := &storetest.Batches{Store: st, One: true}
			var under store.Store = bc
			if _, ok := tc.s.(*strategy.Optimistic); ok {
				under = watchingCounter{bc}
			}
			lim, err := limiter.New(under, tc.s)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			asks := make([]limiter.Ask, 16)
			for round := range 2 { // the first loads the scripts (NOSCRIPT, then EVAL)
				bc.Zero()
				for i := range asks {
					asks[i] = limiter.Ask{Key: fmt.Sprintf("s%d-%d", round, i), Limits: []limiter.Limit{limiter.PerHour(10)}}
				}
				for i, a := range lim.AllowMany(ctx, asks) {
					if a.Err != nil || !a.Result.Allowed {
						t.Fatalf("ask %d: %+v", i, a)
					}
				}
			}
			batched := bc.BatchCount() == 1 && bc.CmdCount() == 1
			if batched != tc.batches {
				t.Errorf("16 asks sent %d batches of %d commands in all; the docs say batched: %v", bc.BatchCount(), bc.CmdCount(), tc.batches)
			}
		})
	}
}

// watchingCounter is a storetest.Batches that passes WATCH on (Optimistic's
// transactions).
type watchingCounter struct{ *storetest.Batches }

func (w watchingCounter) Watch(ctx context.Context, keys []string, fn func(store.Tx) error) error {
	return w.Store.(store.Watcher).Watch(ctx, keys, fn)
}

// TestAllowManyLarge: on one server 150 asks go in three calls (64, 64,
// 22), each ask decided as AllowN would: every subject asked twice in the
// batch, its second ask denied when the two costs exceed its limit.
func TestAllowManyLarge(t *testing.T) {
	_, st := newMiniFastFail(t)
	bc := &storetest.Batches{Store: st, One: true}
	lim, err := limiter.New(bc, strategy.NewFixedWindow())
	if err != nil {
		t.Fatal(err)
	}
	l, hour := limiter.PerMinute(3), limiter.PerHour(100)
	asks := make([]limiter.Ask, 150)
	for i := range asks {
		// subject i/2, cost 1 then 2 for an even subject, 2 then 2 for
		// an odd one (over 3: denied); every third subject also per hour
		subject := i / 2
		cost := int64(2)
		if subject%2 == 0 && i%2 == 0 {
			cost = 1
		}
		asks[i] = limiter.Ask{Key: fmt.Sprintf("s%d", subject), Cost: cost, Limits: []limiter.Limit{l}}
		if subject%3 == 0 {
			asks[i].Limits = append(asks[i].Limits, hour)
		}
	}
	answers := lim.AllowMany(context.Background(), asks)
	for i, a := range answers {
		subject := i / 2
		want := i%2 == 0 || subject%2 == 0 // the first ask; or 1 + 2 <= 3
		if a.Err != nil || a.Result.Allowed != want {
			t.Errorf("ask %d (subject %d, cost %d): %+v, %v; want allowed %v", i, subject, asks[i].Cost, a.Result, a.Err, want)
		}
	}
	// one batch, after the first call's NOSCRIPT a second one
	if b, c := bc.BatchCount(), bc.CmdCount(); b != 2 || c != 6 {
		t.Errorf("%d batches of %d commands, want 2 of 6 (3 calls, then 3 again after NOSCRIPT)", b, c)
	}
}

// cannedBatcher answers every batch as one server would answer
// FixedWindow's many-request calls of requests that are all admitted (a
// count of 1, 1000 ms left, for a rate of 2^40 per second), or with reply
// for each request when it is set, without I/O: what AllowMany allocates
// itself shows.
type cannedBatcher struct {
	store.Store
	reply int64
}

func (cannedBatcher) OneServer() bool { return true }

func (cb cannedBatcher) Batch(ctx context.Context, cmds []store.Cmd) []store.Reply {
	const admitted = 1000*(2<<40+1) + 1 // FixedWindow's one-integer reply
	reply := cb.reply
	if reply == 0 {
		reply = admitted
	}
	out := make([]store.Reply, len(cmds))
	for i, c := range cmds {
		n := c.Args[1].(int) // the number of keys: one per request
		vals := make([]any, n)
		for j := range vals {
			vals[j] = reply
		}
		out[i] = store.Reply{Val: vals}
	}
	return out
}

// TestAllowManyAllocations: AllowMany's own allocations per decision (16
// asks in one many-request call, the store's answer made apart) stay few:
// the asks' keys and limits share one array each, and the arguments that
// recur are boxed once (9.1 per decision when each ask had arrays of its
// own and every argument a box of its own; 5.2 since), and the call's
// working memory is pooled (4.3 since).
func TestAllowManyAllocations(t *testing.T) {
	_, st := newMiniFastFail(t)
	lim, err := limiter.New(cannedBatcher{Store: st}, strategy.NewFixedWindow())
	if err != nil {
		t.Fatal(err)
	}
	l := limiter.PerSecond(1 << 40)
	asks := make([]limiter.Ask, 16)
	for i := range asks {
		asks[i] = limiter.Ask{Key: fmt.Sprintf("a%d", i), Cost: 1, Limits: []limiter.Limit{l}}
	}
	ctx := context.Background()
	check := func() {
		for i, a := range lim.AllowMany(ctx, asks) {
			if a.Err != nil || !a.Result.Allowed || a.Result.Remaining != 1<<40-1 {
				t.Fatalf("ask %d: %+v", i, a)
			}
		}
	}
	check()
	// The canned answer's own: its replies, and each request's array and
	// boxed integers.
	var canned float64
	{
		cmds := []store.Cmd{{Name: "EVALSHA", Args: []any{"", 16}}}
		canned = testing.AllocsPerRun(100, func() { cannedBatcher{}.Batch(ctx, cmds) })
	}
	per := (testing.AllocsPerRun(200, check) - canned) / float64(len(asks))
	t.Logf("AllowMany: %.2f allocations per decision of its own", per)
	if per > 5 {
		t.Errorf("AllowMany makes %.2f allocations per decision of its own, want at most 5", per)
	}
	// and few bytes: the per-call working memory (requests, calls, packed
	// arguments, replies) is reused from call to call
	bytes := func(f func()) float64 {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		const runs = 200
		for range runs {
			f()
		}
		runtime.ReadMemStats(&m1)
		return float64(m1.TotalAlloc-m0.TotalAlloc) / runs
	}
	cmds := []store.Cmd{{Name: "EVALSHA", Args: []any{"", 16}}}
	check() // the pool holds a scratch
	// the least of three readings: TotalAlloc counts every goroutine's
	// allocations, and a busy machine's (a run of 575 under the race
	// detector beside other packages' tests, 271 alone)
	b := math.Inf(1)
	for range 3 {
		b = min(b, (bytes(check)-bytes(func() { cannedBatcher{}.Batch(ctx, cmds) }))/float64(len(asks)))
	}
	t.Logf("AllowMany: %.0f bytes per decision of its own", b)
	// 650 when every call made its own (with the race detector too); 270
	// since, and 470–570 with the race detector, whose sync.Pool drops a
	// quarter of what goes back, at random
	limit := 400.0
	if raceDetector {
		limit = 620
	}
	if b > limit {
		t.Errorf("AllowMany allocates %.0f bytes per decision of its own, want at most %.0f", b, limit)
	}
}

// TestAllowManyAlignedAllocations: AlignedWindow's decisions in a batch
// share their arrays (arguments, window indexes and keys): 3.12
// allocations per decision of AllowMany's own, the window's key among
// them (5.56 with arrays of each request's own).
func TestAllowManyAlignedAllocations(t *testing.T) {
	_, st := newMiniFastFail(t)
	// (each request admitted: a counter of count 1)
	lim, err := limiter.New(cannedBatcher{Store: st, reply: strategy.AlignedCountBase - 1}, strategy.NewAlignedWindow())
	if err != nil {
		t.Fatal(err)
	}
	l := limiter.PerSecond(1 << 40)
	asks := make([]limiter.Ask, 16)
	for i := range asks {
		asks[i] = limiter.Ask{Key: fmt.Sprintf("a%d", i), Limits: []limiter.Limit{l}}
	}
	ctx := context.Background()
	check := func() {
		for i, a := range lim.AllowMany(ctx, asks) {
			if a.Err != nil || !a.Result.Allowed || a.Result.Remaining != 1<<40-1 {
				t.Fatalf("ask %d: %+v", i, a)
			}
		}
	}
	check() // the server's clock read once (TIME)
	cmds := []store.Cmd{{Name: "EVALSHA", Args: []any{"", 16}}}
	canned := testing.AllocsPerRun(100, func() { cannedBatcher{reply: strategy.AlignedCountBase - 1}.Batch(ctx, cmds) })
	per := (testing.AllocsPerRun(200, check) - canned) / float64(len(asks))
	t.Logf("AllowMany, AlignedWindow: %.2f allocations per decision of its own", per)
	// 3.12 measured; 3.44-3.56 with the race detector, whose sync.Pool
	// drops a quarter of what goes back to it, at random
	limit := 3.5
	if raceDetector {
		limit = 4
	}
	if per > limit {
		t.Errorf("AllowMany makes %.2f allocations per decision of AlignedWindow, want at most %.2f", per, limit)
	}
}

// TestAllowManyDuplicatesInOrder: asks of one subject are decided in the
// asks' order, as the same Allows one after another: of 65 asks at 64 per
// minute the first 64 are admitted and the last denied. Through a batch
// whose many-request script the server lacks while it has the plain one
// (an Allow ran before: a call left alone went as the plain script and
// ran first, the others after their NOSCRIPT, so the 65th was admitted and
// the 64th denied), and through a strategy decided one call per ask
// (Bucketed: the asks ran side by side, in any order).
func TestAllowManyDuplicatesInOrder(t *testing.T) {
	l := limiter.PerMinute(64)
	for _, s := range []limiter.Strategy{strategy.NewFixedWindow(), strategy.NewBucketed()} {
		_, st := newMiniFastFail(t)
		lim, err := limiter.New(st, s)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if r, err := lim.Allow(ctx, "other", l); err != nil || !r.Allowed {
			t.Fatalf("%T: %+v, %v", s, r, err)
		}
		asks := make([]limiter.Ask, 65)
		for i := range asks {
			asks[i] = limiter.Ask{Key: "u", Limits: []limiter.Limit{l}}
		}
		var wrong []int
		for i, a := range lim.AllowMany(ctx, asks) {
			if a.Err != nil {
				t.Fatalf("%T: ask %d: %v", s, i, a.Err)
			}
			if a.Result.Allowed != (i < 64) || a.Result.Allowed && a.Result.Remaining != int64(63-i) {
				wrong = append(wrong, i)
			}
		}
		if len(wrong) > 0 {
			t.Errorf("%T: asks %v decided out of order; want the first 64 admitted (remaining 63 down to 0), the 65th denied", s, wrong)
		}
	}
}
