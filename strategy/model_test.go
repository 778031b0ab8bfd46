package strategy_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// The reference models of GCRA, TokenBucket, SlidingWindow and SlidingLog,
// written from their documentation, against which TestStrategiesMatchModels
// drives each strategy through a Limiter on miniredis's virtual clock. Time
// is in whole milliseconds since a run's start.

// lmodel is the model of one limit's state.
type lmodel interface {
	fits(now, cost int64) bool
	admit(now, cost int64)
	remaining(now int64) int64
	resetAfter(now int64) int64
	capacity() int64
	// checkKey checks the key's existence and TTL (ms; -1 none) at now
	checkKey(now int64, exists bool, ttl int64) error
	clear()
	period() int64
}

// cdiv is the ceiling of a / b for a >= 0.
func cdiv(a, b int64) int64 {
	return (a + b - 1) / b
}

// gcraM is GCRA: emission interval I in µs (rounded up), burst B, and the
// theoretical arrival time.
type gcraM struct {
	I, B, P int64
	tat     int64 // µs
}

func (m *gcraM) rel(now int64) int64       { return max(m.tat-now*1000, 0) }
func (m *gcraM) capacity() int64           { return m.B }
func (m *gcraM) period() int64             { return m.P }
func (m *gcraM) clear()                    { m.tat = 0 }
func (m *gcraM) fits(now, c int64) bool    { return c <= m.B && m.rel(now)+c*m.I <= m.B*m.I }
func (m *gcraM) admit(now, c int64)        { m.tat = now*1000 + m.rel(now) + c*m.I }
func (m *gcraM) remaining(now int64) int64 { return (m.B*m.I - m.rel(now)) / m.I }
func (m *gcraM) resetAfter(now int64) int64 {
	return cdiv(m.rel(now), 1000)
}
func (m *gcraM) checkKey(now int64, exists bool, ttl int64) error {
	r := m.rel(now)
	if (r > 0) != exists {
		return fmt.Errorf("key exists=%v, want %v (rel %dus)", exists, r > 0, r)
	}
	if exists && ttl != cdiv(r, 1000) {
		return fmt.Errorf("key ttl %dms, want %d (rel %dus)", ttl, cdiv(r, 1000), r)
	}
	return nil
}

// tbM is TokenBucket, in units of 1/Pus of a token, R of them a µs: the
// level s written at T (ms).
type tbM struct {
	R, Pus, B, P int64
	s, T         int64
	set          bool
}

func (m *tbM) full() int64 { return m.B * m.Pus }
func (m *tbM) level(now int64) int64 {
	if !m.set {
		return m.full()
	}
	el := now - m.T
	lim := m.full()/(1000*m.R) + 2
	if el > lim {
		el = lim
	}
	return min(m.full(), m.s+el*1000*m.R)
}
func (m *tbM) capacity() int64           { return m.B }
func (m *tbM) period() int64             { return m.P }
func (m *tbM) clear()                    { m.set = false }
func (m *tbM) fits(now, c int64) bool    { return c <= m.B && m.level(now) >= c*m.Pus }
func (m *tbM) admit(now, c int64)        { m.s, m.T, m.set = m.level(now)-c*m.Pus, now, true }
func (m *tbM) remaining(now int64) int64 { return m.level(now) / m.Pus }
func (m *tbM) resetAfter(now int64) int64 {
	return cdiv(m.full()-m.level(now), 1000*m.R)
}
func (m *tbM) msForm() bool { return m.Pus%(m.R*1000) == 0 }
func (m *tbM) checkKey(now int64, exists bool, ttl int64) error {
	lv := m.level(now)
	reset := m.resetAfter(now)
	fill := cdiv(m.full(), 1000*m.R)
	if m.msForm() {
		if (lv < m.full()) != exists {
			return fmt.Errorf("key exists=%v, want %v", exists, lv < m.full())
		}
		if exists && ttl != reset {
			return fmt.Errorf("key ttl %d, want %d", ttl, reset)
		}
		return nil
	}
	if lv < m.full() && !exists {
		return fmt.Errorf("key missing while bucket not full (level %d of %d)", lv, m.full())
	}
	if exists && (ttl < reset || ttl > fill) {
		return fmt.Errorf("key ttl %d outside [%d, %d]", ttl, reset, fill)
	}
	return nil
}

// swM is SlidingWindow: the window that started at S (ms), its count c and
// the previous window's p.
type swM struct {
	R, P    int64
	S, c, p int64
	active  bool
}

func (m *swM) view(now int64) (c, p, e int64, k int64) {
	if !m.active {
		return 0, 0, 0, -1
	}
	k = (now - m.S) / m.P
	if k == 0 {
		return m.c, m.p, now - m.S, 0
	}
	if k == 1 && m.c > 0 {
		return 0, m.c, now - m.S - m.P, 1
	}
	return 0, 0, 0, -1
}
func (m *swM) capacity() int64 { return m.R }
func (m *swM) period() int64   { return m.P }
func (m *swM) clear()          { m.active = false }
func (m *swM) fits(now, cost int64) bool {
	c, p, e, _ := m.view(now)
	return cost <= m.R && (c+cost)*m.P+p*(m.P-e) <= m.R*m.P
}
func (m *swM) admit(now, cost int64) {
	_, _, _, k := m.view(now)
	switch k {
	case -1:
		m.S, m.c, m.p, m.active = now, cost, 0, true
	case 0:
		m.c += cost
	case 1:
		m.S, m.p, m.c = m.S+m.P, m.c, cost
	}
}
func (m *swM) remaining(now int64) int64 {
	c, p, e, _ := m.view(now)
	return max(0, (m.R*m.P-c*m.P-p*(m.P-e))/m.P)
}
func (m *swM) resetAfter(now int64) int64 {
	c, p, e, _ := m.view(now)
	switch {
	case c > 0:
		return 2*m.P - e
	case p > 0:
		return m.P - e
	}
	return 0
}
func (m *swM) checkKey(now int64, exists bool, ttl int64) error {
	_, _, _, k := m.view(now)
	if (k >= 0) != exists {
		return fmt.Errorf("key exists=%v, want %v", exists, k >= 0)
	}
	if exists && ttl != m.resetAfter(now) {
		return fmt.Errorf("key ttl %d, want %d", ttl, m.resetAfter(now))
	}
	return nil
}

// slM is SlidingLog: the time of every unit admitted.
type slM struct {
	R, P  int64
	units []int64
}

func (m *slM) count(now int64) int64 {
	var n int64
	for _, u := range m.units {
		if u > now-m.P {
			n++
		}
	}
	return n
}
func (m *slM) capacity() int64        { return m.R }
func (m *slM) period() int64          { return m.P }
func (m *slM) clear()                 { m.units = nil }
func (m *slM) fits(now, c int64) bool { return c <= m.R && m.count(now)+c <= m.R }
func (m *slM) admit(now, c int64) {
	for range c {
		m.units = append(m.units, now)
	}
}
func (m *slM) remaining(now int64) int64 { return max(0, m.R-m.count(now)) }
func (m *slM) resetAfter(now int64) int64 {
	if m.count(now) == 0 {
		return 0
	}
	return m.units[len(m.units)-1] + m.P - now
}
func (m *slM) checkKey(now int64, exists bool, ttl int64) error {
	want := m.count(now) > 0
	if want != exists {
		return fmt.Errorf("key exists=%v, want %v", exists, want)
	}
	if exists && ttl != m.resetAfter(now) {
		return fmt.Errorf("key ttl %d, want %d", ttl, m.resetAfter(now))
	}
	return nil
}

// retryOf returns the wait until cost fits m: 0 when it does now, -1 when
// it never does, else the least d >= 1 such that it fits at now + d, found
// by doubling and bisection (fitting is monotone in time while nothing is
// written).
func retryOf(m lmodel, now, cost int64) int64 {
	if cost > m.capacity() {
		return -1
	}
	if m.fits(now, cost) {
		return 0
	}
	hi := int64(1)
	for !m.fits(now+hi, cost) {
		hi *= 2
		if hi > 1<<45 {
			panic("no fit")
		}
	}
	lo := hi / 2 // !fits(now+lo) (or lo == 0)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if m.fits(now+mid, cost) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// expect is a decision as the models make it.
type expect struct {
	allowed      bool
	remaining    int64
	reset, retry int64
	index        int
}

// modelDecide decides cost at now on the models of a call's limits, all or
// nothing, and binds as limiter.Binder does.
func modelDecide(ms []lmodel, now, cost int64, dry bool) expect {
	allowed := true
	for _, m := range ms {
		if !m.fits(now, cost) {
			allowed = false
		}
	}
	if allowed && !dry && cost > 0 {
		for _, m := range ms {
			m.admit(now, cost)
		}
	}
	type st struct{ rem, reset, retry int64 }
	s := make([]st, len(ms))
	for i, m := range ms {
		s[i] = st{m.remaining(now), m.resetAfter(now), retryOf(m, now, cost)}
	}
	if allowed {
		b := 0
		for i := 1; i < len(s); i++ {
			if s[i].rem < s[b].rem || s[i].rem == s[b].rem && s[i].reset > s[b].reset {
				b = i
			}
		}
		return expect{true, s[b].rem, s[b].reset, 0, b}
	}
	b := -1
	for i := range s {
		if s[i].retry == 0 {
			continue
		}
		if b < 0 || s[b].retry != -1 && (s[i].retry == -1 || s[i].retry > s[b].retry) {
			b = i
		}
	}
	return expect{false, s[b].rem, s[b].reset, s[b].retry, b}
}

// modelKind is a strategy under test.
type modelKind int

const (
	kGCRA modelKind = iota
	kTB
	kSW
	kSL
)

func (k modelKind) String() string {
	return [...]string{"gcra", "tokenbucket", "slidingwindow", "slidinglog"}[k]
}

func (k modelKind) strategy() limiter.Strategy {
	switch k {
	case kGCRA:
		return strategy.NewGCRA()
	case kTB:
		return strategy.NewTokenBucket()
	case kSW:
		return strategy.NewSlidingWindow()
	}
	return strategy.NewSlidingLog()
}

func newModel(k modelKind, l limiter.Limit) lmodel {
	b := l.Burst
	if b == 0 {
		b = l.Rate
	}
	P := l.Period.Milliseconds()
	switch k {
	case kGCRA:
		us := l.Period.Microseconds()
		return &gcraM{I: (us + l.Rate - 1) / l.Rate, B: b, P: P}
	case kTB:
		return &tbM{R: l.Rate, Pus: l.Period.Microseconds(), B: b, P: P}
	case kSW:
		return &swM{R: l.Rate, P: P}
	}
	return &slM{R: l.Rate, P: P}
}

var modelPeriods = []time.Duration{time.Millisecond, 2 * time.Millisecond, 7 * time.Millisecond, 10 * time.Millisecond, time.Second, 3 * time.Second, time.Minute, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, 31 * 24 * time.Hour}
var modelRates = []int64{1, 2, 3, 5, 7, 10, 12, 60, 100}

func randLimit(r *rand.Rand, k modelKind, name string) limiter.Limit {
	for {
		var p time.Duration
		if r.IntN(5) == 0 {
			p = time.Duration(1+r.IntN(5000)) * time.Millisecond
		} else {
			p = modelPeriods[r.IntN(len(modelPeriods))]
		}
		rate := modelRates[r.IntN(len(modelRates))]
		if r.IntN(4) == 0 {
			rate = 1 + r.Int64N(40)
		}
		big := *modelBig && r.IntN(2) == 0
		if big {
			bigRates := []int64{999, 1000, 1001, 3600, 86399, 86400, 1_000_000, 65_536, 1<<26 - 1, 7_777_777, 1 << 30, 1 << 40}
			rate = bigRates[r.IntN(len(bigRates))]
			if k == kSL {
				rate = []int64{999, 1000, 1001, 3000}[r.IntN(4)]
			}
		}
		l := limiter.Limit{Rate: rate, Period: p, Name: name}
		if (k == kGCRA || k == kTB) && r.IntN(2) == 0 {
			l.Burst = 1 + r.Int64N(15)
			if big {
				l.Burst = 1 + r.Int64N(1<<uint(r.IntN(45)))
			}
		}
		bb := l.Burst
		if bb == 0 {
			bb = l.Rate
		}
		if k == kTB && bb > (1<<51)/l.Period.Microseconds() {
			continue
		}
		if k == kSW && (rate > 1<<26-1 || rate > (1<<51)/p.Milliseconds()) {
			continue
		}
		if k == kGCRA {
			us := p.Microseconds()
			if rate > us {
				continue
			}
			I := (us + rate - 1) / rate
			b := l.Burst
			if b == 0 {
				b = rate
			}
			if b >= 1e15/I { // third form: documented 2 ms slack
				continue
			}
		}
		return l
	}
}

// modelKey is a key as a run sees it, to tell whether a call wrote.
type modelKey struct {
	typ, val string
	ttl      time.Duration
}

// modelKeys returns the keys of m (those filt keeps, when not nil); for
// SlidingLog, without the members that have left their window, which any
// call may trim.
func modelKeys(m *redistest.Mini, k modelKind, nowUs int64, periodOf map[string]int64, filt func(string) bool) map[string]modelKey {
	out := map[string]modelKey{}
	for _, key := range m.Keys() {
		if filt != nil && !filt(key) {
			continue
		}
		e := modelKey{typ: m.Type(key), ttl: m.TTL(key)}
		if e.typ == "string" {
			e.val, _ = m.Get(key)
		} else if e.typ == "zset" {
			zs, _ := m.SortedSet(key)
			var mem []string
			for name, sc := range zs {
				if k == kSL && int64(sc) <= nowUs-periodOf[key]*1000 {
					continue // left the window: trimming is allowed
				}
				mem = append(mem, name+"@"+strconv.FormatFloat(sc, 'f', 0, 64))
			}
			sort.Strings(mem)
			e.val = fmt.Sprint(mem)
		}
		out[key] = e
	}
	return out
}

// runModel makes nops random calls of strategy k, with one random limit or
// two, and checks each against the models.
func runModel(t *testing.T, k modelKind, seed uint64, nops int, twoLimits bool) {
	r := rand.New(rand.NewPCG(seed, 99))
	m := redistest.NewMini(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	lim, err := limiter.New(goredis.New(rdb), k.strategy(), limiter.WithPrefix("m"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := m.Now()
	startUs := start.UnixMicro()
	var now int64
	advance := func(d int64) {
		if d > 0 {
			m.Advance(time.Duration(d) * time.Millisecond)
			now += d
		}
	}

	L := []limiter.Limit{randLimit(r, k, "a")}
	if twoLimits {
		L = append(L, randLimit(r, k, "b"))
	}
	subjects := []string{"s", "z"}
	models := make([][]lmodel, 2)
	keys := make([][]string, 2)
	periodOf := map[string]int64{}
	for si, subj := range subjects {
		models[si] = make([]lmodel, len(L))
		keys[si] = make([]string, len(L))
		for i, l := range L {
			models[si][i] = newModel(k, l)
			keys[si][i], _ = limiter.Key("m", subj, l)
			periodOf[keys[si][i]] = l.Period.Milliseconds()
		}
	}
	desc := fmt.Sprintf("%s seed=%d limits=%+v", k, seed, L)
	var log []string
	fail := func(format string, a ...any) {
		t.Helper()
		n := len(log)
		if n > 30 {
			log = log[n-30:]
		}
		for _, s := range log {
			t.Log(s)
		}
		t.Fatalf("%s: "+format, append([]any{desc}, a...)...)
	}
	maxCap := int64(0)
	for _, mm := range models[0] {
		maxCap = max(maxCap, mm.capacity())
	}
	pickSet := func() []int {
		if len(L) == 1 {
			return []int{0}
		}
		switch r.IntN(4) {
		case 0:
			return []int{0}
		case 1:
			return []int{1}
		case 2:
			return []int{1, 0}
		}
		return []int{0, 1}
	}
	type denial struct {
		ok    bool
		set   []int
		cost  int64
		retry int64
	}
	lastDenied := make([]denial, 2)
	var beforeExact map[string]modelKey
	check := func(si int, opname string, set []int, cost int64, dry bool, res limiter.Result, before map[string]modelKey, filt func(string) bool) {
		t.Helper()
		ls := make([]limiter.Limit, len(set))
		ms := make([]lmodel, len(set))
		for i, j := range set {
			ls[i], ms[i] = L[j], models[si][j]
		}
		want := modelDecide(ms, now, cost, dry)
		log = append(log, fmt.Sprintf("t=%d %s %s cost=%d set=%v -> %+v ; model %+v", now, subjects[si], opname, cost, set, res, want))
		got := expect{res.Allowed, res.Remaining, res.ResetAfter.Milliseconds(), res.RetryAfter.Milliseconds(), res.Index}
		if res.RetryAfter == -1 {
			got.retry = -1
		}
		if res.ResetAfter%time.Millisecond != 0 || res.RetryAfter > 0 && res.RetryAfter%time.Millisecond != 0 {
			fail("non-ms durations %+v", res)
		}
		if got != want {
			fail("t=%d %s %s cost=%d set=%v: got %+v, model %+v", now, subjects[si], opname, cost, set, got, want)
		}
		if res.Limit != ls[res.Index] {
			fail("Limit %v != ls[Index]", res.Limit)
		}
		if res.Degraded || res.Cached || res.Leased {
			fail("flags %+v", res)
		}
		written := res.Allowed && !dry && cost > 0
		if !written && before != nil {
			kk := k
			if dry || cost == 0 {
				kk = kGCRA // exact compare, no trimming allowed
				before = beforeExact
			}
			after := modelKeys(m, kk, startUs+now*1000, periodOf, filt)
			if fmt.Sprint(after) != fmt.Sprint(before) {
				fail("t=%d %s cost=%d (allowed=%v dry=%v) wrote:\n before %v\n after  %v", now, opname, cost, res.Allowed, dry, before, after)
			}
		}
		if !res.Allowed && res.RetryAfter > 0 {
			lastDenied[si] = denial{true, set, cost, res.RetryAfter.Milliseconds()}
		} else if res.Allowed {
			lastDenied[si].ok = false
		}
	}
	for op := 0; op < nops; op++ {
		si := 0
		if r.IntN(4) == 0 {
			si = 1
		}
		subj := subjects[si]
		// time
		switch x := r.IntN(10); {
		case x < 3:
		case x < 5:
			advance(1)
		case x < 7:
			p := models[0][r.IntN(len(L))].period()
			advance(r.Int64N(max(p/max(models[0][0].capacity(), 1), 1) + 1))
		case x < 8:
			p := models[0][r.IntN(len(L))].period()
			advance(r.Int64N(p + 1))
		case x < 9:
			if lastDenied[si].ok && lastDenied[si].retry > 1 {
				advance(lastDenied[si].retry - 1)
			}
		default:
			if lastDenied[si].ok && lastDenied[si].retry > 0 {
				advance(lastDenied[si].retry)
			}
		}
		set := pickSet()
		mkls := func(set []int) []limiter.Limit {
			ls := make([]limiter.Limit, len(set))
			for i, j := range set {
				ls[i] = L[j]
			}
			return ls
		}
		ls := mkls(set)
		var cost int64
		var dry bool
		var opname string
		x := r.IntN(22)
		if lastDenied[si].ok && r.IntN(3) == 0 {
			set = lastDenied[si].set
			ls = mkls(set)
			cost, opname = lastDenied[si].cost, "AllowN(repeat)"
			x = 100
		}
		before := modelKeys(m, k, startUs+now*1000, periodOf, nil)
		beforeExact = modelKeys(m, kGCRA, startUs+now*1000, periodOf, nil)
		var res limiter.Result
		switch {
		case x == 100:
			res, err = lim.AllowN(ctx, subj, cost, ls...)
		case x < 2:
			for _, j := range set {
				models[si][j].clear()
			}
			err = lim.Reset(ctx, subj, ls...)
			log = append(log, fmt.Sprintf("t=%d %s Reset %v -> %v", now, subj, set, err))
			if err != nil {
				fail("reset: %v", err)
			}
			goto checkKeys
		case x < 4:
			// AllowMany: one ask per subject, in random order
			{
				order := []int{0, 1}
				if r.IntN(2) == 0 {
					order = []int{1, 0}
				}
				if r.IntN(3) == 0 {
					order = order[:1]
				}
				type askInfo struct {
					si   int
					set  []int
					cost int64
				}
				var infos []askInfo
				var asks []limiter.Ask
				for _, s2 := range order {
					st := pickSet()
					c := pickCost(r, now, models[s2], st, maxCap)
					infos = append(infos, askInfo{s2, st, c})
					asks = append(asks, limiter.Ask{Key: subjects[s2], Cost: c, Limits: mkls(st)})
				}
				ans := lim.AllowMany(ctx, asks)
				for i, a := range ans {
					if a.Err != nil {
						fail("AllowMany ask %d: %v", i, a.Err)
					}
					c := infos[i].cost
					if c == 0 {
						c = 1
					}
					check(infos[i].si, "AllowMany", infos[i].set, c, false, a.Result, nil, nil)
				}
			}
			goto checkKeys
		case x < 7:
			cost, dry, opname = 1, true, "Peek"
			res, err = lim.Peek(ctx, subj, ls...)
		case x < 9:
			cost, opname = 1, "Allow"
			res, err = lim.Allow(ctx, subj, ls...)
		default:
			cost, opname = pickCost(r, now, models[si], set, maxCap), "AllowN"
			res, err = lim.AllowN(ctx, subj, cost, ls...)
		}
		if err != nil {
			fail("t=%d %s cost %d on %v: %v", now, opname, cost, set, err)
		}
		check(si, opname, set, cost, dry, res, before, nil)
	checkKeys:
		for s2 := range subjects {
			for i, key := range keys[s2] {
				exists := m.Exists(key)
				var ttl int64 = -2
				if exists {
					d := m.TTL(key)
					if d <= 0 {
						fail("key %s without TTL (%v)", key, d)
					}
					if d%time.Millisecond != 0 {
						fail("key %s TTL %v not whole ms", key, d)
					}
					ttl = d.Milliseconds()
				}
				if err := models[s2][i].checkKey(now, exists, ttl); err != nil {
					v, _ := m.Get(key)
					fail("t=%d key %s (%q): %v", now, key, v, err)
				}
			}
		}
		if n := len(m.Keys()); n > 2*len(L) {
			fail("stray keys: %q", m.Keys())
		}
	}
}

// pickCost picks a cost: any up to the largest burst + 1, or one at an
// edge of a limit (0, 1, 2, its capacity and around it, what remains and
// one more).
func pickCost(r *rand.Rand, now int64, ms []lmodel, set []int, maxCap int64) int64 {
	if r.IntN(2) == 0 {
		return r.Int64N(maxCap + 2)
	}
	m := ms[set[r.IntN(len(set))]]
	c := m.capacity()
	cands := []int64{0, 1, 2, c, c - 1, c + 1, m.remaining(now), max(m.remaining(now)+1, 0)}
	return max(cands[r.IntN(len(cands))], 0)
}

var (
	modelSeeds = flag.Int("model.seeds", 3, "TestStrategiesMatchModels: runs per strategy and number of limits")
	modelOps   = flag.Int("model.ops", 150, "TestStrategiesMatchModels: calls per run")
	modelSeed  = flag.Uint64("model.seed", 1, "TestStrategiesMatchModels: the first run's seed")
	modelBig   = flag.Bool("model.big", false, "TestStrategiesMatchModels: half the limits with modelRates and bursts up to 2^40")
)

// TestStrategiesMatchModels drives GCRA, TokenBucket, SlidingWindow and
// SlidingLog, each with one limit and with two, through random calls
// (Allow, AllowN of costs from 0 to past the burst, Peek, Reset,
// AllowMany) of two subjects on miniredis's virtual clock, moved by 0, 1
// ms, a fraction of a period, up to a period, and a denial's RetryAfter or
// a millisecond less; limits of modelPeriods from 1 ms to 31 days, modelRates whose
// intervals are whole milliseconds and not (3/s, 7/min). Every decision is
// compared with the models' (admitted, Remaining, ResetAfter, RetryAfter
// and the binding limit); a call that admits nothing writes nothing; after
// every call each key exists exactly while its model holds state, with
// the TTL its documentation gives, and there is no other key. Deeper runs:
//
//	go test ./strategy -run StrategiesMatchModels -model.seeds 100 -model.ops 500 [-model.big]
func TestStrategiesMatchModels(t *testing.T) {
	for _, k := range []modelKind{kGCRA, kTB, kSW, kSL} {
		for _, two := range []bool{false, true} {
			for s := *modelSeed; s < *modelSeed+uint64(*modelSeeds); s++ {
				t.Run(fmt.Sprintf("%s/two=%v/seed=%d", k, two, s), func(t *testing.T) {
					runModel(t, k, s, *modelOps, two)
				})
			}
		}
	}
}
