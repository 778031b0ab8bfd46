package goredis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/adaptertest"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// incr is the script the sharing tests run: it counts its calls per key.
const incr = adaptertest.CountScript

// roundTrips is a go-redis hook that records the round trips of script
// calls: single commands, and pipelines with their sizes. Calls on the
// key "held" wait in the hook until release is closed; pipelines wait
// delay before they are written (or after their replies came, when
// after is set).
type roundTrips struct {
	mu        sync.Mutex
	singles   int
	pipelines []int
	held      atomic.Int32
	release   chan struct{}
	delay     time.Duration
	after     bool
	// hang, when set, holds every pipeline until it is closed.
	hang chan struct{}
}

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "evalsha" && cmd.Name() != "eval" {
			return next(ctx, cmd)
		}
		h.mu.Lock()
		h.singles++
		h.mu.Unlock()
		if args := cmd.Args(); len(args) > 3 && fmt.Sprint(args[3]) == "held" {
			h.held.Add(1)
			<-h.release
		}
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return c.Name() == "evalsha" || c.Name() == "eval" }) {
			return next(ctx, cmds) // a new connection's set-up
		}
		h.mu.Lock()
		h.pipelines = append(h.pipelines, len(cmds))
		h.mu.Unlock()
		if h.hang != nil {
			<-h.hang
		}
		if !h.after {
			time.Sleep(h.delay)
		}
		err := next(ctx, cmds)
		if h.after {
			time.Sleep(h.delay)
		}
		return err
	}
}

func (h *roundTrips) counts() (int, []int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.singles, slices.Clone(h.pipelines)
}

// sharingSetup starts a redis-server and returns a Store on a client
// hooked by h, with the script loaded.
func sharingSetup(t *testing.T, h *roundTrips, ctxTimeouts bool) (*goredis.Store, *redis.Client, string) {
	t.Helper()
	srv := redistest.StartServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, ContextTimeoutEnabled: ctxTimeouts})
	t.Cleanup(func() { _ = rdb.Close() })
	sha, err := rdb.ScriptLoad(context.Background(), incr).Result()
	if err != nil {
		t.Fatal(err)
	}
	h.release = make(chan struct{})
	rdb.AddHook(h)
	return goredis.New(rdb), rdb, sha
}

// waitFor polls cond for up to 10 s (a busy machine's scheduling).
var waitFor = adaptertest.WaitFor

// holdSlots sends two calls on the key "held", which wait in the hook:
// both of the Store's pipelines (DefaultSharedPipelines) are then in
// flight. It returns a function that waits for them to end.
func holdSlots(t *testing.T, st *goredis.Store, h *roundTrips, sha string) (wait func()) {
	t.Helper()
	if goredis.DefaultSharedPipelines != 2 {
		t.Fatalf("DefaultSharedPipelines = %d; the test holds 2 slots", goredis.DefaultSharedPipelines)
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, err := st.EvalSha(context.Background(), sha, []string{"held"}, nil); err != nil {
				t.Errorf("held call: %v", err)
			}
		})
	}
	waitFor(t, "2 held calls in the hook", func() bool { return h.held.Load() == 2 })
	return wg.Wait
}

// TestSharedPipelinesUnderLoad: when both pipelines are in flight, the
// calls that arrive meanwhile queue and then leave together, in one
// pipeline of all of them, each with its own reply (the counts 1..14, each
// once); the key counts exactly the 14 calls.
func TestSharedPipelinesUnderLoad(t *testing.T) {
	h := &roundTrips{}
	st, rdb, sha := sharingSetup(t, h, true)
	ctx := context.Background()
	wait := holdSlots(t, st, h, sha)
	const n = 14
	got := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var v any
			v, errs[i] = st.EvalSha(ctx, sha, []string{"k"}, nil)
			got[i], _ = v.(int64)
		})
	}
	waitFor(t, fmt.Sprintf("%d calls queued", n), func() bool { return goredis.Queued(st) == n })
	close(h.release)
	wg.Wait()
	wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	slices.Sort(got)
	for i, v := range got {
		if v != int64(i+1) {
			t.Fatalf("replies = %v; want 1..%d, each once", got, n)
		}
	}
	if c, err := rdb.Get(ctx, "k").Int64(); err != nil || c != n {
		t.Errorf("k = %d, %v; want %d", c, err, n)
	}
	singles, pipes := h.counts()
	if singles != 2 || !slices.Equal(pipes, []int{n}) {
		t.Errorf("round trips: %d single calls, pipelines of %v; want the 2 held calls alone and one pipeline of %d", singles, pipes, n)
	}
	// The slots are free again: a lone call goes alone.
	if _, err := st.EvalSha(ctx, sha, []string{"k"}, nil); err != nil {
		t.Fatal(err)
	}
	if singles, pipes := h.counts(); singles != 3 || len(pipes) != 1 {
		t.Errorf("after the load, a lone call: %d single calls, pipelines %v; want 3 and 1", singles, pipes)
	}
}

// TestSharedPipelinesLoneCaller: one caller at a time never waits for a
// pipeline: each call is its own round trip, as without sharing.
func TestSharedPipelinesLoneCaller(t *testing.T) {
	h := &roundTrips{}
	st, _, sha := sharingSetup(t, h, true)
	for i := range 20 {
		if v, err := st.EvalSha(context.Background(), sha, []string{"k"}, nil); err != nil || v != int64(i+1) {
			t.Fatalf("call %d = %v, %v", i, v, err)
		}
	}
	if singles, pipes := h.counts(); singles != 20 || len(pipes) != 0 {
		t.Errorf("%d single calls, pipelines %v; want 20 and none", singles, pipes)
	}
	off := goredis.New(st.Client(), goredis.WithSharedPipelines(0))
	if _, err := off.EvalSha(context.Background(), "0000000000000000000000000000000000000000", nil, nil); !errors.Is(err, store.ErrNoScript) {
		t.Errorf("sharing off: unknown sha = %v; want ErrNoScript", err)
	}
}

// TestSharedPipelineQueuedDeadline: a call whose context ends while it
// waits to share a pipeline is never sent: its error is the deadline's,
// without store.ErrUnknownOutcome, and its key was never counted; the
// calls after it are served as before.
func TestSharedPipelineQueuedDeadline(t *testing.T) {
	for _, ctxTimeouts := range []bool{true, false} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", ctxTimeouts), func(t *testing.T) {
			h := &roundTrips{}
			st, rdb, sha := sharingSetup(t, h, ctxTimeouts)
			wait := holdSlots(t, st, h, sha)
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, err := st.EvalSha(ctx, sha, []string{"gone"}, nil)
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, store.ErrUnknownOutcome) {
				t.Errorf("queued call past its deadline = %v; want context.DeadlineExceeded, not store.ErrUnknownOutcome", err)
			}
			if q := goredis.Queued(st); q != 0 {
				t.Errorf("%d calls still queued after the only one left", q)
			}
			close(h.release)
			wait()
			if n, err := rdb.Exists(context.Background(), "gone").Result(); err != nil || n != 0 {
				t.Errorf("EXISTS gone = %d, %v; want 0: the abandoned call ran", n, err)
			}
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					if _, err := st.EvalSha(context.Background(), sha, []string{"k"}, nil); err != nil {
						t.Errorf("later call: %v", err)
					}
				})
			}
			wg.Wait()
			if c, err := rdb.Get(context.Background(), "k").Int64(); err != nil || c != 8 {
				t.Errorf("k = %d, %v; want 8", c, err)
			}
		})
	}
}

// TestSharedPipelineCallerLeavesInFlight: the first call of a shared
// pipeline, which sends it, has the shortest deadline; it passes while
// the pipeline is out. The pipeline still waits for the others' replies
// (until the latest deadline), and the caller who left gets the outcome
// it can know: not sent (its command goes as one the server refuses,
// unrun) when the pipeline had not been written, store.ErrUnknownOutcome
// when it had (and then it ran).
func TestSharedPipelineCallerLeavesInFlight(t *testing.T) {
	for _, after := range []bool{false, true} {
		for _, ctxTimeouts := range []bool{true, false} {
			t.Run(fmt.Sprintf("written=%v/ContextTimeoutEnabled=%v", after, ctxTimeouts), func(t *testing.T) {
				h := &roundTrips{delay: 600 * time.Millisecond, after: after}
				st, rdb, sha := sharingSetup(t, h, ctxTimeouts)
				wait := holdSlots(t, st, h, sha)
				short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				long, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel2()
				var shortErr, longErr error
				var longV any
				var wg sync.WaitGroup
				wg.Go(func() { _, shortErr = st.EvalSha(short, sha, []string{"short"}, nil) })
				waitFor(t, "the short call queued", func() bool { return goredis.Queued(st) == 1 })
				wg.Go(func() { longV, longErr = st.EvalSha(long, sha, []string{"long"}, nil) })
				waitFor(t, "both calls queued", func() bool { return goredis.Queued(st) == 2 })
				close(h.release)
				wg.Wait()
				wait()
				if longErr != nil || longV != int64(1) {
					t.Errorf("long call = %v, %v; want 1: the pipeline ended at the short call's deadline?", longV, longErr)
				}
				short1, err := rdb.Get(context.Background(), "short").Int64()
				if err != nil && !errors.Is(err, redis.Nil) {
					t.Fatal(err)
				}
				if !errors.Is(shortErr, context.DeadlineExceeded) {
					t.Errorf("short call = %v; want context.DeadlineExceeded", shortErr)
				}
				if after {
					if !errors.Is(shortErr, store.ErrUnknownOutcome) || short1 != 1 {
						t.Errorf("short call written, then abandoned = %v (key %d); want store.ErrUnknownOutcome, and the call ran once", shortErr, short1)
					}
				} else if errors.Is(shortErr, store.ErrUnknownOutcome) || short1 != 0 {
					t.Errorf("short call abandoned before its pipeline was written = %v (key %d); want a known outcome, and the call never ran", shortErr, short1)
				}
				if _, pipes := h.counts(); !slices.Equal(pipes, []int{2}) {
					t.Errorf("pipelines %v; want one of 2", pipes)
				}
			})
		}
	}
}

// TestSharedPipelineServerGone: calls queued behind a server that stops
// answering each end at their own deadline, and the Store serves again
// once it is back.
func TestSharedPipelineServerGone(t *testing.T) {
	m := redistest.NewMini(t)
	p := redistest.NewProxy(t, m.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	st := goredis.New(rdb)
	ctx := context.Background()
	if _, err := st.Eval(ctx, incr, []string{"k"}, nil); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	var wg sync.WaitGroup
	errs := make([]error, 12)
	start := time.Now()
	for i := range errs {
		wg.Go(func() {
			c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			_, errs[i] = st.Eval(c, incr, []string{"k"}, nil)
		})
	}
	wg.Wait()
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("calls with 200ms deadlines on a silent server returned after %v", took.Round(time.Millisecond))
	}
	for i, err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("call %d = %v; want context.DeadlineExceeded", i, err)
		}
	}
	p.Blackhole(false)
	waitFor(t, "the store to serve again", func() bool {
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := st.Eval(c, incr, []string{"k"}, nil)
		return err == nil
	})
}

// TestSharedPipelinesCluster: on a ClusterClient the calls of many
// goroutines share pipelines per master, every count exact, with
// ContextTimeoutEnabled and without (where the adapter bounds the calls,
// and the first lookup in the slot map, itself); and a master that stops
// answering holds only its own calls: those for another master are
// answered meanwhile, within their deadlines.
func TestSharedPipelinesCluster(t *testing.T) {
	c := redistest.StartCluster(t)
	addrs := c.Addrs()
	for _, ctxTimeouts := range []bool{true, false} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", ctxTimeouts), func(t *testing.T) {
			rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRetries: -1, ContextTimeoutEnabled: ctxTimeouts})
			t.Cleanup(func() { _ = rdb.Close() })
			h := &roundTrips{release: make(chan struct{})}
			rdb.AddHook(h)
			st := goredis.New(rdb)
			ka, kb := keyOn(t, rdb, addrs[0]), keyOn(t, rdb, addrs[1])
			p := fmt.Sprint(ctxTimeouts)
			keys := []string{ka, kb, ka + p, kb + p, "a" + p, "b" + p, "c" + p, "d" + p}
			// (ka and kb are the same keys in both runs: their counts
			// before this one's)
			before := map[string]int64{}
			for _, k := range keys {
				before[k], _ = rdb.Get(context.Background(), k).Int64()
			}
			const callers, each = 24, 40
			adaptertest.HammerKeys(t, st, keys, callers, each)
			for _, k := range keys {
				if n, err := rdb.Get(context.Background(), k).Int64(); err != nil || n-before[k] != callers*each/int64(len(keys)) {
					t.Errorf("%s counted %d, %v; want %d", k, n-before[k], err, callers*each/len(keys))
				}
			}
			if _, pipes := h.counts(); len(pipes) == 0 || slices.Max(pipes) < 2 {
				t.Errorf("%d callers shared no pipeline (pipelines %v)", callers, pipes)
			}

			pause := redis.NewClient(&redis.Options{Addr: addrs[1]})
			defer pause.Close()
			adaptertest.OneMasterSilent(t, st, func() func() {
				if err := pause.Do(context.Background(), "CLIENT", "PAUSE", 2000, "ALL").Err(); err != nil {
					t.Fatal(err)
				}
				return func() { pause.Do(context.Background(), "CLIENT", "UNPAUSE") }
			}, kb, ka)
		})
	}
}

// TestSharedPipelinesClusterFirstLookup: without ContextTimeoutEnabled,
// the first lookup in a ClusterClient's slot map, which loads it from the
// Cluster, ends at the call's deadline: a Cluster that does not answer
// holds a call no longer than its context allows (go-redis alone would
// wait for its own timeouts), and the store serves once it answers.
func TestSharedPipelinesClusterFirstLookup(t *testing.T) {
	c := redistest.StartCluster(t)
	p := redistest.NewProxy(t, c.Addrs()[0])
	p.Blackhole(true)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{p.Addr()}, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	st := goredis.New(rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := st.Eval(ctx, incr, []string{"first"}, nil)
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > 2*time.Second {
		t.Fatalf("a call on a silent Cluster with a 300ms deadline: %v after %s; want DeadlineExceeded at its deadline", err, took)
	}
	if errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("a call that never found its node reported %v; want a known outcome (never sent)", err)
	}
	p.Blackhole(false)
	waitFor(t, "the store to serve", func() bool {
		c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := st.Eval(c, incr, []string{"first"}, nil)
		return err == nil
	})
}

// TestSharedPipelinesDeadlineStorm: many callers on one key with deadlines
// of a fraction of a millisecond to a few, so that calls end while queued,
// while their pipeline is out, and after their replies. Every call that
// failed without store.ErrUnknownOutcome never ran: the key counts at
// least every admitted call and at most those plus the unknown outcomes;
// the admitted calls' counts are distinct; at the end nothing is queued
// and nothing counted in flight.
func TestSharedPipelinesDeadlineStorm(t *testing.T) {
	srv := redistest.StartServer(t)
	for _, ctxTimeouts := range []bool{true, false} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", ctxTimeouts), func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, ContextTimeoutEnabled: ctxTimeouts})
			t.Cleanup(func() { _ = rdb.Close() })
			st := goredis.New(rdb)
			key := fmt.Sprintf("storm-%v", ctxTimeouts)
			const callers, each = 32, 60
			o := adaptertest.Hammer(t, st, key, callers, each, adaptertest.StormTimeout(each))
			waitFor(t, "the calls given up on to end", func() bool {
				return goredis.Queued(st) == 0 && goredis.InFlight(st) == 0
			})
			n, err := rdb.Get(context.Background(), key).Int64()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatal(err)
			}
			o.CheckCount(t, n)
		})
	}
}

// TestSharedPipelineNeverReturns: a pipeline that does not return (a
// server gone silent with socket timeouts off) frees its slot once every
// call in it has given up, so that it cannot hold the Store's pipelines
// after its callers left.
func TestSharedPipelineNeverReturns(t *testing.T) {
	h := &roundTrips{hang: make(chan struct{})}
	st, _, sha := sharingSetup(t, h, true)
	t.Cleanup(func() { close(h.hang) })
	wait := holdSlots(t, st, h, sha)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, errs[i] = st.EvalSha(ctx, sha, []string{"x"}, nil)
		})
		waitFor(t, "the calls queued", func() bool { return goredis.Queued(st) == i+1 })
	}
	close(h.release)
	wg.Wait()
	wait()
	for i, err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("call %d in a pipeline that never returns = %v; want context.DeadlineExceeded", i, err)
		}
	}
	waitFor(t, "no round trip counted in flight once every caller left", func() bool { return goredis.InFlight(st) == 0 })
	if _, pipes := h.counts(); !slices.Equal(pipes, []int{2}) {
		t.Errorf("pipelines %v; want one of 2", pipes)
	}
}
