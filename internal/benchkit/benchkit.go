package benchkit

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotagate/limiter"
)

const (
	// SubjectsPerCaller spreads each caller over a few keys, so that no
	// level runs on one hot key.
	SubjectsPerCaller = 4

	// RatioRounds is the number of rounds per level in RunRatio, each
	// running every variant for RatioRoundTime, in an order that rotates.
	RatioRounds = 6
	// RatioRoundTime is how long each variant runs in one round of RunRatio.
	RatioRoundTime = 250 * time.Millisecond
	// RatioWarmUp is how long each variant runs once per level before the
	// rounds of RunRatio.
	RatioWarmUp = 50 * time.Millisecond
	// RatioAllocCalls is the number of sequential calls behind the
	// allocation figures of RunRatio.
	RatioAllocCalls = 5000
)

// Decide makes one decision for subject and fails unless it is admitted.
type Decide func(ctx context.Context, subject string) error

// Variant is a named way of making a decision, such as "raw" or "limiter".
type Variant struct {
	// Name names the sub-benchmark of RunFixedWindow.
	Name string
	// Decide makes one admitted decision.
	Decide Decide
	// Warm, when set, is what Compare's warm-up calls instead of Decide:
	// the same decision without what only the measured rounds should
	// see (a Timing wrapper's histogram).
	Warm Decide
}

// Kit holds the concurrency levels and the subjects of every caller.
type Kit struct {
	// Callers are the concurrency levels: exactly this many goroutines call
	// at once. The last is the widest.
	Callers []int
	// Subjects[w] are the subjects of caller w, the same for all variants.
	Subjects [][]string
	// Done, when not nil, ends every measurement at its next call once it
	// is closed (an interrupted command): what it returns then is partial.
	Done <-chan struct{}
}

// Stopped reports that k.Done is closed.
func (k *Kit) Stopped() bool {
	select {
	case <-k.Done:
		return true
	default:
		return false
	}
}

// New returns a Kit for the given concurrency levels (ascending), with
// SubjectsPerCaller subjects "user-WW-J" for each caller of the widest
// level. check, if not nil, is called on every subject (for example to
// compare a hand-built key with the limiter's); an error fails tb.
func New(tb testing.TB, callers []int, check func(subject string) error) *Kit {
	tb.Helper()
	k := NewKit(callers)
	if check != nil {
		for _, subjects := range k.Subjects {
			for _, s := range subjects {
				if err := check(s); err != nil {
					tb.Fatal(err)
				}
			}
		}
	}
	return k
}

// NewKit is New without a check, for use outside tests.
func NewKit(callers []int) *Kit {
	k := &Kit{Callers: callers, Subjects: make([][]string, callers[len(callers)-1])}
	for w := range k.Subjects {
		for j := range SubjectsPerCaller {
			k.Subjects[w] = append(k.Subjects[w], fmt.Sprintf("user-%02d-%d", w, j))
		}
	}
	return k
}

// Tally is the calls a variant made and the time they took, summed over
// rounds.
type Tally struct {
	N int64
	D time.Duration
}

// Rate returns the calls per second.
func (t Tally) Rate() float64 { return float64(t.N) / t.D.Seconds() }

// Compare runs the variants with exactly callers goroutines: each for warm
// once (its Warm when set), then in rounds rounds of round each, in an
// order that rotates every round to cancel drift. It returns each
// variant's tally and, per round, each variant's rate over the first
// variant's.
func (k *Kit) Compare(callers, rounds int, warm, round time.Duration, vs []Variant) ([]Tally, [][]float64, error) {
	for _, v := range vs { // goroutine stacks, server caches
		f := v.Decide
		if v.Warm != nil {
			f = v.Warm
		}
		if _, _, err := k.Timed(callers, warm, f); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", v.Name, err)
		}
	}
	sums := make([]Tally, len(vs))
	ratios := make([][]float64, len(vs))
	for r := range rounds {
		rates := make([]float64, len(vs))
		for j := range vs {
			vi := (r + j) % len(vs)
			n, d, err := k.Timed(callers, round, vs[vi].Decide)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", vs[vi].Name, err)
			}
			sums[vi].N += n
			sums[vi].D += d
			rates[vi] = float64(n) / d.Seconds()
		}
		for vi := range vs {
			ratios[vi] = append(ratios[vi], rates[vi]/rates[0])
		}
	}
	return sums, ratios, nil
}

// ServerRounds measures each variant's server time per call in rounds
// interleaved as Compare's: in each of rounds rounds every variant runs
// alone with callers goroutines for d, between reset (which zeroes the
// server's statistics) and read (which returns the server's time per call
// since), in an order that rotates every round to cancel drift. It
// returns, per variant, its readings in round order.
func (k *Kit) ServerRounds(callers, rounds int, d time.Duration, vs []Variant, reset func() error, read func() (float64, error)) ([][]float64, error) {
	us := make([][]float64, len(vs))
	for r := range rounds {
		for j := range vs {
			vi := (r + j) % len(vs)
			if err := reset(); err != nil {
				return nil, err
			}
			if _, _, err := k.Timed(callers, d, vs[vi].Decide); err != nil {
				return nil, fmt.Errorf("%s: %w", vs[vi].Name, err)
			}
			u, err := read()
			if err != nil {
				return nil, err
			}
			us[vi] = append(us[vi], u)
		}
	}
	return us, nil
}

// RoundRatios returns, per round, xs[r] / base[r].
func RoundRatios(xs, base []float64) []float64 {
	out := make([]float64, len(xs))
	for r := range xs {
		out[r] = xs[r] / base[r]
	}
	return out
}

// MaxCallers returns the widest concurrency level.
func (k *Kit) MaxCallers() int { return k.Callers[len(k.Callers)-1] }

// Counted returns a more func for FanOut that allows n calls in all.
func Counted(n int64) func() bool {
	var left atomic.Int64
	left.Store(n)
	return func() bool { return left.Add(-1) >= 0 }
}

// FanOut runs exactly callers goroutines; caller w calls f on its subjects
// in turn for as long as more reports true. It returns the number of calls
// made and the first error, which stops every caller.
func (k *Kit) FanOut(callers int, more func() bool, f Decide) (int64, error) {
	ctx := context.Background()
	var (
		wg       sync.WaitGroup
		total    atomic.Int64
		failed   atomic.Bool
		errOnce  sync.Once
		firstErr error
	)
	for w := range callers {
		subjects := k.Subjects[w]
		wg.Go(func() {
			var n int64
			for i := 0; !failed.Load() && more() && !k.Stopped(); i++ {
				if err := f(ctx, subjects[i%len(subjects)]); err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("caller %d: %w", w, err) })
					failed.Store(true)
					break
				}
				n++
			}
			total.Add(n)
		})
	}
	wg.Wait()
	return total.Load(), firstErr
}

// Timed runs f with callers goroutines for about d and returns the calls
// made and the time they took. It makes at least one call even when d ends
// before any goroutine starts (a loaded machine), so that a reading taken
// after it never covers zero calls.
func (k *Kit) Timed(callers int, d time.Duration, f Decide) (int64, time.Duration, error) {
	var stop, called atomic.Bool
	start := time.Now()
	t := time.AfterFunc(d, func() { stop.Store(true) })
	defer t.Stop()
	n, err := k.FanOut(callers, func() bool { return !stop.Load() || !called.Load() },
		func(ctx context.Context, subject string) error {
			err := f(ctx, subject)
			if !called.Load() { // a load, not a store, on every call after the first
				called.Store(true)
			}
			return err
		})
	return n, time.Since(start), err
}

// SeqAllocs returns the heap allocations and bytes per call of calls
// sequential calls of f by one caller, after 100 calls of warm-up. Once
// k.Done is closed it stops at its next call and returns zeros.
func (k *Kit) SeqAllocs(f Decide, calls int) (allocs, bytes float64, err error) {
	ctx := context.Background()
	subjects := k.Subjects[0]
	for i := range 100 {
		if k.Stopped() {
			return 0, 0, nil
		}
		if err := f(ctx, subjects[i%len(subjects)]); err != nil {
			return 0, 0, err
		}
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range calls {
		// (Stopped allocates nothing: the counts stay the calls')
		if i%64 == 0 && k.Stopped() {
			return 0, 0, nil
		}
		if err := f(ctx, subjects[i%len(subjects)]); err != nil {
			return 0, 0, err
		}
	}
	runtime.ReadMemStats(&after)
	n := float64(calls)
	return float64(after.Mallocs-before.Mallocs) / n, float64(after.TotalAlloc-before.TotalAlloc) / n, nil
}

// RunFixedWindow runs one sub-benchmark "cN/name" per concurrency level N
// and variant: b.N decisions shared by exactly N callers, reporting
// allocations and decisions/s.
func (k *Kit) RunFixedWindow(b *testing.B, variants []Variant) {
	for _, c := range k.Callers {
		b.Run(fmt.Sprintf("c%d", c), func(b *testing.B) {
			for _, v := range variants {
				b.Run(v.Name, func(b *testing.B) {
					b.ReportAllocs()
					more := Counted(int64(b.N))
					b.ResetTimer()
					_, err := k.FanOut(c, more, v.Decide)
					b.StopTimer()
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
				})
			}
		})
	}
}

// Extra is an additional variant for RunRatio, compared with the limiter
// at one concurrency level only.
type Extra struct {
	// Variant is run in the same rounds as raw and limiter, at Callers.
	Variant Variant
	// Callers is the one concurrency level at which Variant runs.
	Callers int
	// Metric names the reported limiter/extra decisions/s ratio, such as
	// "vs-goredis-raw-c64".
	Metric string
}

// RunRatio compares raw and lim within one invocation: for each level it
// runs them (and extra, at its level) in RatioRounds rounds of
// RatioRoundTime each, rotating which goes first to cancel drift, and
// reports
//
//   - ratio-cN: limiter decisions/s over raw decisions/s with N callers,
//     from the pooled counts and times of all rounds;
//   - median-ratio-cN: the median of the rounds' ratios, which a round
//     stalled by the machine (another process, a hypervisor) moves less;
//   - extra.Metric, if extra is not nil: limiter decisions/s over extra's
//     at extra.Callers;
//   - extra-allocs-c1, extra-B-c1: the limiter's allocations (and bytes) per
//     decision minus raw's, from RatioAllocCalls sequential calls each;
//   - allocs/op and B/op: the limiter's per decision, from the same
//     sequential calls (the framework's own figure would be per whole
//     measurement); ns/op is suppressed for the same reason.
//
// Each iteration of b.Loop is one measurement; a -benchtime above one
// measurement's time repeats it and pools the rounds.
func (k *Kit) RunRatio(b *testing.B, raw, lim Variant, extra *Extra) {
	const (
		rawV = iota
		limV
		extraV
	)
	b.ReportAllocs()
	vs := []Variant{raw, lim}
	if extra != nil {
		vs = append(vs, extra.Variant)
	}
	sums := make([][3]Tally, len(k.Callers))
	rounds := make([][]float64, len(k.Callers))
	var allocs, bytes [2]float64
	measurements := 0

	for b.Loop() {
		measurements++
		for li, c := range k.Callers {
			nv := 2
			if extra != nil && c == extra.Callers {
				nv = 3 // the extra variant only where its comparison is reported
			}
			tallies, ratios, err := k.Compare(c, RatioRounds, RatioWarmUp, RatioRoundTime, vs[:nv])
			if err != nil {
				b.Fatal(err)
			}
			for vi, t := range tallies {
				sums[li][vi].N += t.N
				sums[li][vi].D += t.D
			}
			rounds[li] = append(rounds[li], ratios[limV]...)
		}
		for vi, v := range vs[:2] {
			a, by, err := k.SeqAllocs(v.Decide, RatioAllocCalls)
			if err != nil {
				b.Fatal(err)
			}
			allocs[vi] += a
			bytes[vi] += by
		}
	}

	rate := func(t Tally) float64 { return t.Rate() }
	for li, c := range k.Callers {
		rr, lr := rate(sums[li][rawV]), rate(sums[li][limV])
		med := Median(rounds[li])
		b.ReportMetric(lr/rr, fmt.Sprintf("ratio-c%d", c))
		b.ReportMetric(med, fmt.Sprintf("median-ratio-c%d", c))
		b.Logf("c%d: %s %.0f decisions/s, %s %.0f decisions/s, ratio %.3f, median of rounds %.3f; per round %s",
			c, raw.Name, rr, lim.Name, lr, lr/rr, med, FmtRatios(rounds[li]))
		if extra != nil && c == extra.Callers {
			er := rate(sums[li][extraV])
			b.ReportMetric(lr/er, extra.Metric)
			b.Logf("c%d: %s %.0f decisions/s; %s / %s %.3f", c, extra.Variant.Name, er, lim.Name, extra.Variant.Name, lr/er)
		}
	}
	m := float64(measurements)
	b.ReportMetric((allocs[limV]-allocs[rawV])/m, "extra-allocs-c1")
	b.ReportMetric((bytes[limV]-bytes[rawV])/m, "extra-B-c1")
	// The framework truncates these two to integers: round instead.
	b.ReportMetric(math.Round(allocs[limV]/m), "allocs/op")
	b.ReportMetric(math.Round(bytes[limV]/m), "B/op")
	b.ReportMetric(0, "ns/op")
	b.Logf("sequential, per decision: %s %.2f allocs %.0f B, %s %.2f allocs %.0f B",
		raw.Name, allocs[rawV]/m, bytes[rawV]/m, lim.Name, allocs[limV]/m, bytes[limV]/m)
}

// RunSharing compares unshared and shared (the same decisions, one round
// trip per call and sharing round trips) at each of k's levels, in
// RatioRounds interleaved rounds of RatioRoundTime, b.N times: it reports
// each one's decisions/s (unshared-cN-decisions/s, shared-cN-decisions/s)
// and shared-x-unshared-cN, the median of the rounds' ratios.
func (k *Kit) RunSharing(b *testing.B, unshared, shared Variant) {
	b.Helper()
	vs := []Variant{unshared, shared}
	for range b.N {
		for _, n := range k.Callers {
			tallies, ratios, err := k.Compare(n, RatioRounds, RatioWarmUp, RatioRoundTime, vs)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(tallies[0].Rate(), fmt.Sprintf("unshared-c%d-decisions/s", n))
			b.ReportMetric(tallies[1].Rate(), fmt.Sprintf("shared-c%d-decisions/s", n))
			b.ReportMetric(Median(ratios[1]), fmt.Sprintf("shared-x-unshared-c%d", n))
		}
	}
}

// Median returns the median of xs (the mean of the middle two for an even
// count), without changing xs.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// FmtRatios formats rs with three decimals, separated by spaces.
func FmtRatios(rs []float64) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = fmt.Sprintf("%.3f", r)
	}
	return strings.Join(s, " ")
}

// ManyAsks returns, for each of callers callers, perCall asks of cost 1
// against l, each of its own subject, for Limiter.AllowMany.
func ManyAsks(callers, perCall int, l limiter.Limit) [][]limiter.Ask {
	asks := make([][]limiter.Ask, callers)
	for w := range asks {
		for j := range perCall {
			asks[w] = append(asks[w], limiter.Ask{Key: fmt.Sprintf("many-%02d-%02d", w, j), Limits: []limiter.Limit{l}})
		}
	}
	return asks
}

// Many returns a Decide that makes one AllowMany call of asks (a caller's
// set in turn) and fails unless every ask is admitted.
func Many(lim *limiter.Limiter, asks [][]limiter.Ask) Decide {
	var next atomic.Int64
	return func(ctx context.Context, _ string) error {
		for _, a := range lim.AllowMany(ctx, asks[int(next.Add(1))%len(asks)]) {
			if a.Err != nil {
				return a.Err
			}
			if !a.Result.Allowed {
				return fmt.Errorf("AllowMany: %s denied", a.Result.Limit)
			}
		}
		return nil
	}
}
