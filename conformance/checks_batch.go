package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// Property 40: AllowMany decides each ask exactly as AllowN would. Four
// callers send six batches each, every batch asking once for each of eight
// subjects (four at cost 1 against 5 per hour, then four at cost 2 against
// 6 per hour), once for a subject whose counter is corrupt (a hash at its
// key, amid the others), and three bad asks: every subject is admitted
// exactly its limit's worth (unknown outcomes counted apart), the corrupt
// one is limiter.ErrCorruptCounter in every batch and changes no other
// answer, every bad ask is its own sentinel error (empty key, negative
// cost, invalid limit) and writes nothing, and on a server the suite may
// flush, the batches after a SCRIPT FLUSH are decided without an error.
func checkAllowMany(c *checker) {
	const workers, batches = 4, 6
	ones, twos := limiter.PerHour(5), limiter.PerHour(6)
	c.window(ones, twos)
	lim := c.limiter(nil)
	type subject struct {
		key  string
		cost int64
		l    limiter.Limit
	}
	// asks under the same limit and cost one after another (a batch may
	// send their arguments once)
	var subjects []subject
	for i := range 4 {
		subjects = append(subjects, subject{fmt.Sprintf("p40-a%d", i), 1, ones})
	}
	for i := range 4 {
		subjects = append(subjects, subject{fmt.Sprintf("p40-b%d", i), 2, twos})
	}
	// The corrupt subject: counted once, then its key made a hash.
	const corrupt = "p40-corrupt"
	if r, err := lim.Allow(c.ctx, corrupt, ones); err != nil || !r.Allowed {
		c.t.Fatalf("property 40: the first call for %s = %+v, %v; want admitted", corrupt, r, err)
	}
	c.corrupt(c.limitKeys(corrupt, []limiter.Limit{ones})[0], "hash")
	// where each subject's ask is: the corrupt one amid them
	const corruptAt = 2
	at := make([]int, len(subjects))
	for i := range at {
		at[i] = i
		if i >= corruptAt {
			at[i]++
		}
	}
	bad := []struct {
		ask  limiter.Ask
		want error
	}{
		{limiter.Ask{Key: "", Limits: []limiter.Limit{ones}}, limiter.ErrInvalidKey},
		{limiter.Ask{Key: "p40-bad-cost", Cost: -1, Limits: []limiter.Limit{ones}}, limiter.ErrInvalidCost},
		{limiter.Ask{Key: "p40-bad-limit", Limits: []limiter.Limit{{Rate: 0, Period: time.Hour}}}, limiter.ErrInvalidLimit},
	}
	asks := make([]limiter.Ask, len(subjects)+1, len(subjects)+1+len(bad))
	for i, s := range subjects {
		asks[at[i]] = limiter.Ask{Key: s.key, Cost: s.cost, Limits: []limiter.Limit{s.l}}
	}
	asks[corruptAt] = limiter.Ask{Key: corrupt, Limits: []limiter.Limit{ones}}
	for _, b := range bad {
		asks = append(asks, b.ask)
	}
	first := len(subjects) + 1 // the first bad ask

	var mu sync.Mutex
	admitted := make([]int64, len(subjects))
	unknownCost := make([]int64, len(subjects))
	var errs []error
	var problems []string
	// fresh: the first batch, alone, on subjects not asked before: each
	// admitted ask is told exactly what is left (Remaining), as AllowN
	// would tell it
	fresh := true
	batch := func() {
		ctx, cancel := context.WithTimeout(c.ctx, loadTimeout)
		defer cancel()
		answers := lim.AllowMany(ctx, asks)
		mu.Lock()
		defer mu.Unlock()
		if len(answers) != len(asks) {
			problems = append(problems, fmt.Sprintf("%d answers to %d asks", len(answers), len(asks)))
			return
		}
		switch a := answers[corruptAt]; {
		case errors.Is(a.Err, store.ErrUnknownOutcome):
			errs = append(errs, a.Err)
		case !errors.Is(a.Err, limiter.ErrCorruptCounter):
			problems = append(problems, fmt.Sprintf("%s, whose counter is a hash: %+v, %v; want limiter.ErrCorruptCounter", corrupt, a.Result, a.Err))
		}
		for i, s := range subjects {
			a := answers[at[i]]
			switch {
			case errors.Is(a.Err, store.ErrUnknownOutcome):
				unknownCost[i] += s.cost
				errs = append(errs, a.Err)
			case a.Err != nil:
				errs = append(errs, fmt.Errorf("%s: %w", s.key, a.Err))
			case a.Result.Allowed:
				admitted[i] += s.cost
			case a.Result.RetryAfter == 0:
				problems = append(problems, fmt.Sprintf("%s denied with no RetryAfter: %+v", s.key, a.Result))
			}
			if a.Err == nil && a.Result.Limit != s.l {
				problems = append(problems, fmt.Sprintf("%s: binding limit %v, want %v", s.key, a.Result.Limit, s.l))
			}
			if fresh && a.Err == nil && c.spec.LeaseUnits == 0 && (!a.Result.Allowed || a.Result.Remaining != s.l.Rate-s.cost || a.Result.ResetAfter <= 0 || a.Result.ResetAfter > c.spec.life(s.l.Period)) {
				problems = append(problems, fmt.Sprintf("%s, the first ask (cost %d) of a fresh subject: %+v; want admitted with %d remaining, ResetAfter in (0, %s]", s.key, s.cost, a.Result, s.l.Rate-s.cost, c.spec.life(s.l.Period)))
			}
		}
		for j, b := range bad {
			if a := answers[first+j]; !errors.Is(a.Err, b.want) {
				problems = append(problems, fmt.Sprintf("bad ask %+v: %+v, %v; want %v", b.ask, a.Result, a.Err, b.want))
			}
		}
	}
	start := time.Now()
	batch()
	fresh = false
	if c.h.Caps().Private {
		for _, n := range c.h.Nodes() {
			if rs, err := n.Do(c.ctx, store.Cmd{Name: "SCRIPT", Args: []any{"FLUSH"}}); err != nil || rs[0].Err != nil {
				c.t.Fatalf("SCRIPT FLUSH: %v %v", err, rs)
			}
		}
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range batches {
				batch()
			}
		}()
	}
	wg.Wait()
	calls := (1 + workers*batches) * (len(subjects) + 1)
	c.unknownOutcomes("property 40", calls, errs)
	for _, p := range problems[:min(len(problems), 5)] {
		c.t.Errorf("property 40: %s", p)
	}
	for i, s := range subjects {
		rate, rf := s.l.Rate, c.refill(s.l, start)
		// Every subject is asked far more than its limit: exactly the
		// limit's worth in units of its cost is admitted.
		want := rate / s.cost * s.cost
		if a := admitted[i]; a > rate+rf || a+unknownCost[i] < want {
			c.t.Errorf("property 40: %s (cost %d, %s) was admitted %d units in batches; want %d (%d of unknown outcome, %d refilled)", s.key, s.cost, s.l, a, want, unknownCost[i], rf)
		}
	}
	for _, k := range c.keys() {
		if strings.Contains(k, "p40-bad") {
			c.t.Errorf("property 40: a bad ask wrote %q", k)
		}
	}
	// Asks of fewer keys and fewer arguments after asks of more, on fresh
	// subjects, each admitted as AllowN would admit it: a many-request
	// script that reuses one request's tables for the next must cut them to
	// each request's length. (Two limits of distinct periods at cost 2,
	// then one limit at cost 1, sent as the limit's arguments alone.)
	half := limiter.Limit{Rate: 6, Period: 30 * time.Minute}
	mixed := []limiter.Ask{
		{Key: "p40-mix-a", Cost: 2, Limits: []limiter.Limit{twos, half}},
		{Key: "p40-mix-b", Cost: 1, Limits: []limiter.Limit{ones}},
		{Key: "p40-mix-c", Cost: 2, Limits: []limiter.Limit{twos}},
		{Key: "p40-mix-d", Cost: 1, Limits: []limiter.Limit{ones}},
	}
	for i, a := range lim.AllowMany(c.ctx, mixed) {
		switch {
		case errors.Is(a.Err, store.ErrUnknownOutcome):
		case a.Err != nil || !a.Result.Allowed:
			c.t.Errorf("property 40: %+v, the first ask of a fresh subject after an ask of more keys or arguments: %+v, %v; want admitted", mixed[i], a.Result, a.Err)
		case c.spec.LeaseUnits == 0 && len(mixed[i].Limits) == 1 && a.Result.Remaining != mixed[i].Limits[0].Rate-mixed[i].Cost:
			c.t.Errorf("property 40: %+v, the first ask of a fresh subject after an ask of more keys or arguments: %+v; want %d remaining", mixed[i], a.Result, mixed[i].Limits[0].Rate-mixed[i].Cost)
		}
	}
}
