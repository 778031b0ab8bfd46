package main

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/benchkit"
	"github.com/quotagate/limiter/internal/redistest"
	rueidisstore "github.com/quotagate/limiter/store/rueidis"
	"github.com/quotagate/limiter/strategy"
)

// TestSlidingLogRawBaselineFair: bench's raw baseline for the sliding log,
// whose nonce changes from call to call, costs what a hand-written EVALSHA
// of the same script and arguments costs (it called the library's
// BatchScript and fmt.Sprint per call: 17 allocations against 7).
func TestSlidingLogRawBaselineFair(t *testing.T) {
	s := redistest.StartServer(t)
	ctx := context.Background()
	st, closeFn, err := rueidisSingle(connOptions{})(ctx, s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	var sp benchStrategy
	for _, b := range benchStrategies() {
		if b.name == "slidinglog" {
			sp = b
		}
	}
	kit := benchkit.NewKit([]int{1})
	keyOf, err := rawKeys("limiter-bench", sp.limit, kit)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rawDecider(st, sp, sp.limit, keyOf)
	if err != nil {
		t.Fatal(err)
	}
	lim, _ := limiter.New(st, sp.s, limiter.WithPrefix("limiter-bench"))
	if _, err := lim.Allow(ctx, "load", sp.limit); err != nil { // loads the script
		t.Fatal(err)
	}
	c := st.(*rueidisstore.Store).Client()
	sha := strategy.SlidingLogScript().Hash()
	rate, window := strconv.FormatInt(sp.limit.Rate, 10), strconv.FormatInt(sp.limit.Period.Milliseconds(), 10)
	byHand := func(subject string) error {
		cmd := c.B().Evalsha().Sha1(sha).Numkeys(1).Key(keyOf(subject)).
			Arg("1", "0", strconv.FormatInt(rand.Int64(), 10), rate, window).Build()
		_, err := c.Do(ctx, cmd).ToAny()
		return err
	}
	i := 0
	subj := func() string { i++; return kit.Subjects[0][i%4] }
	aRaw := testing.AllocsPerRun(2000, func() {
		if err := raw(ctx, subj()); err != nil {
			t.Fatal(err)
		}
	})
	aHand := testing.AllocsPerRun(2000, func() {
		if err := byHand(subj()); err != nil {
			t.Fatal(err)
		}
	})
	aLim := testing.AllocsPerRun(2000, func() {
		if _, err := lim.Allow(ctx, subj(), sp.limit); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("allocations per call: bench's raw baseline %.1f, a hand-written EVALSHA %.1f, the Limiter %.1f", aRaw, aHand, aLim)
	if aRaw > aHand+2 {
		t.Errorf("bench's raw baseline makes %.1f allocations per call where a hand-written EVALSHA of the same script and arguments makes %.1f (the Limiter %.1f): the baseline is handicapped", aRaw, aHand, aLim)
	}
	for _, subject := range append(kit.Subjects[0], "load") {
		_ = lim.Reset(ctx, subject, sp.limit)
	}
}
