package adaptertest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotagate/limiter/store"
)

// CountScript is the script Hammer runs: it counts its calls per key.
const CountScript = "return redis.call('INCR', KEYS[1])"

// Outcomes tallies Hammer's calls.
type Outcomes struct {
	// Admitted calls returned a count, NotSent failed without
	// store.ErrUnknownOutcome (they never ran), Unknown failed with it.
	Admitted, NotSent, Unknown int
}

// Hammer makes callers×each script calls of CountScript on key through st
// from callers goroutines, call i of goroutine g under a context of
// timeout(g, i), and tallies their outcomes. A count returned twice is a
// test error: each call that ran counted once.
func Hammer(t testing.TB, st store.Store, key string, callers, each int, timeout func(g, i int) time.Duration) Outcomes {
	t.Helper()
	var o Outcomes
	seen := map[int64]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for i := range each {
				ctx, cancel := context.WithTimeout(context.Background(), timeout(g, i))
				v, err := st.Eval(ctx, CountScript, []string{key}, nil)
				cancel()
				mu.Lock()
				switch {
				case err == nil:
					n, _ := v.(int64)
					if seen[n] {
						t.Errorf("count %d returned twice", n)
					}
					seen[n] = true
					o.Admitted++
				case errors.Is(err, store.ErrUnknownOutcome):
					o.Unknown++
				default:
					o.NotSent++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return o
}

// CheckCount fails t unless the key Hammer counted on holds n with
// Admitted ≤ n ≤ Admitted + Unknown: every call that failed as not sent
// never ran.
func (o Outcomes) CheckCount(t testing.TB, n int64) {
	t.Helper()
	t.Logf("%d admitted, %d not sent, %d unknown outcomes; the key counts %d", o.Admitted, o.NotSent, o.Unknown, n)
	if n < int64(o.Admitted) || n > int64(o.Admitted+o.Unknown) {
		t.Errorf("the key counts %d; want between the %d admitted calls and those plus the %d unknown outcomes (%d calls failed as not sent)", n, o.Admitted, o.Unknown, o.NotSent)
	}
}

// StormTimeout is a spread of deadlines from 0.2 to 5 ms for Hammer, so
// that calls end while queued, while their round trip is out, and after
// their replies.
func StormTimeout(each int) func(g, i int) time.Duration {
	return func(g, i int) time.Duration {
		return time.Duration(200+(g*each+i)*7919%4800) * time.Microsecond
	}
}

// WaitFor polls cond for up to 10 s (a busy machine's scheduling), and
// fails t when it never holds.
func WaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// OneMasterSilent checks that a silent master holds up only its own calls:
// pause stops the master serving silent (for 2 s; the function it returns
// lets it serve again), then 8 calls on silent must end at their 500 ms
// deadline while 8 on served, a key of another master, are answered
// within 1.5 s.
func OneMasterSilent(t *testing.T, st store.Store, pause func() (resume func()), silent, served string) {
	t.Helper()
	defer pause()()
	var wg sync.WaitGroup
	var ended, answered atomic.Int32
	for range 8 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			if _, err := st.Eval(ctx, CountScript, []string{silent}, nil); errors.Is(err, context.DeadlineExceeded) {
				ended.Add(1)
			}
		})
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			if _, err := st.Eval(ctx, CountScript, []string{served}, nil); err != nil {
				t.Errorf("call for the answering master while another is silent: %v", err)
				return
			}
			answered.Add(1)
		})
	}
	wg.Wait()
	if ended.Load() != 8 || answered.Load() != 8 {
		t.Errorf("while one master was paused: %d of its 8 calls ended at their deadline, %d of the other's 8 were answered; want 8 and 8", ended.Load(), answered.Load())
	}
}

// HammerKeys has callers goroutines make each CountScript calls on st,
// caller g's i-th on keys[(g+i) % len(keys)], each with a 10 s deadline;
// an error fails t.
func HammerKeys(t *testing.T, st store.Store, keys []string, callers, each int) {
	t.Helper()
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for i := range each {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := st.Eval(ctx, CountScript, []string{keys[(g+i)%len(keys)]}, nil)
				cancel()
				if err != nil {
					t.Errorf("caller %d, call %d: %v", g, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
