package strategy_test

// Reference models of FixedWindow, Optimistic, AlignedWindow and Bucketed,
// written from their documentation, driven through limiter.New on
// miniredis's virtual clock. Time is absolute Unix microseconds (the
// virtual clock may sit at fractions of a millisecond, to reach the
// millisecond in which a key expires: PTTL 0).

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

type wKind int

const (
	wFW wKind = iota
	wOpt
	wAW
	wBK
)

func (k wKind) String() string {
	return [...]string{"fixedwindow", "optimistic", "alignedwindow", "bucketed"}[k]
}

// wLim is one limit of one subject.
type wLim struct {
	k    wKind
	R, P int64 // rate, period in ms
	G    int64 // Bucketed: grace in ms (min(grace, P))
	G0   int64 // Bucketed: the grace configured
	key  string

	// FixedWindow / Optimistic: the counter and its expiry (µs)
	c  int64
	E  int64
	on bool

	// Aligned / Bucketed: counts per window index, keys written
	cnt     map[wWin]int64
	written map[wWin]bool
	noTTL   map[wWin]bool // aligned / bucketed keys stripped of their TTL
}

type wWin struct{ P, b int64 }

const wNever = int64(1) << 62 // no expiry

func (l *wLim) idx(now int64) int64 { return floorDiv(now, 1000) / l.P }

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func (l *wLim) fwExists(now int64) bool { return l.on && now < l.E }

// fwLive: the counter's window is not over; the key's expiry millisecond
// (PTTL 0), which Redis keeps it through, belongs to the next window.
func (l *wLim) fwLive(now int64) bool { return l.on && (l.E == wNever || l.E-now >= 1000) }

// fwRepair: a counter without TTL, or one whose PTTL is beyond the Period
func (l *wLim) fwRepair(now int64) bool {
	return l.fwExists(now) && (l.E == wNever || (l.E-now)/1000 > l.P)
}

// count is what the next call counts on.
func (l *wLim) count(now int64) int64 {
	switch l.k {
	case wFW, wOpt:
		if l.fwLive(now) {
			return l.c
		}
		return 0
	}
	return l.cnt[wWin{l.P, l.idx(now)}]
}

func (l *wLim) fits(now, cost int64) bool { return cost <= l.R && l.count(now)+cost <= l.R }

func (l *wLim) admit(now, cost int64) {
	switch l.k {
	case wFW, wOpt:
		if l.fwLive(now) {
			l.c += cost
		} else {
			l.c, l.E, l.on = cost, now+l.P*1000, true
		}
		return
	}
	b := wWin{l.P, l.idx(now)}
	l.cnt[b] += cost
	l.written[b] = true
}

// fwTTL is the ResetAfter FixedWindow / Optimistic report: PTTL, a
// window longer than the Period as it is (a writing call has repaired it
// by now: only a peek or a cost of 0 finds it so), or the Period when
// there is no counter (or its window is over: PTTL 0) or one without TTL.
func (l *wLim) fwTTL(now int64) int64 {
	if !l.fwLive(now) || l.E == wNever {
		return l.P
	}
	return (l.E - now) / 1000
}

// winReset is the time left in the window at server time at (µs).
func (l *wLim) winReset(now, at int64) int64 {
	b := l.idx(now)
	return min(max((b+1)*l.P-floorDiv(at, 1000), 1), l.P)
}

func (l *wLim) clear(now int64) {
	switch l.k {
	case wFW, wOpt:
		l.on = false
		return
	}
	b := l.idx(now)
	for d := int64(-1); d <= 1; d++ {
		delete(l.cnt, wWin{l.P, b + d})
		delete(l.written, wWin{l.P, b + d})
		delete(l.noTTL, wWin{l.P, b + d})
	}
}

type wKey struct {
	val string
	ttl time.Duration
}

// keys returns the keys the limit should have at now.
func (l *wLim) keys(now int64, out map[string]wKey) {
	switch l.k {
	case wFW, wOpt:
		if l.fwExists(now) {
			ttl := time.Duration(l.E-now) * time.Microsecond
			if l.E == wNever {
				ttl = 0
			}
			out[l.key] = wKey{strconv.FormatInt(l.c, 10), ttl}
		}
	case wAW:
		for w, c := range l.cnt {
			end := (w.b + 1) * w.P * 1000
			ttl := time.Duration(end-now) * time.Microsecond
			if l.noTTL[w] {
				ttl, end = 0, wNever
			}
			if c > 0 && now < end {
				out[strategy.AlignedWindowKey(l.key, time.Duration(w.P)*time.Millisecond, w.b)] = wKey{strconv.FormatInt(strategy.AlignedCountBase-c, 10), ttl}
			}
		}
	case wBK:
		for w := range l.written {
			g := min(l.G0, w.P)
			end := ((w.b+1)*w.P + g) * 1000
			ttl := time.Duration(end-now) * time.Microsecond
			if l.noTTL[w] {
				ttl, end = 0, wNever
			}
			if now < end {
				out[l.key+":"+strconv.FormatInt(w.b, 10)] = wKey{strconv.FormatInt(l.cnt[w], 10), ttl}
			}
		}
	}
}

type wPer struct{ rem, reset, retry int64 }

type wExpect struct {
	allowed      bool
	remaining    int64
	reset, retry int64
	index        int
}

// wBind binds as limiter.Binder is documented to.
func wBind(s []wPer, allowed bool) wExpect {
	if allowed {
		b := 0
		for i := 1; i < len(s); i++ {
			if s[i].rem < s[b].rem || s[i].rem == s[b].rem && s[i].reset > s[b].reset {
				b = i
			}
		}
		return wExpect{true, max(s[b].rem, 0), s[b].reset, 0, b}
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
	return wExpect{false, max(s[b].rem, 0), s[b].reset, s[b].retry, b}
}

// wWorld is the model of the whole store for one run.
type wWorld struct {
	k      wKind
	syncS  int64 // AlignedWindow: server µs of the last TIME reading
	synced bool
}

// decide decides cost on ls at now, all or nothing, and applies it.
func (w *wWorld) decide(ls []*wLim, now, cost int64, dry bool) wExpect {
	if w.k == wAW || w.k == wBK {
		if !w.synced {
			w.synced, w.syncS = true, now
		}
	}
	allowed := true
	never := false
	for _, l := range ls {
		if !l.fits(now, cost) {
			allowed = false
		}
		if cost > l.R {
			never = true
		}
	}
	write := !dry && cost > 0 && !never
	before := make([]int64, len(ls))
	for i, l := range ls {
		before[i] = l.count(now)
	}
	// AlignedWindow: the time the result is counted from
	at := now
	if w.k == wAW && write {
		if allowed {
			created := false
			for i := range ls {
				if before[i] == 0 {
					created = true
				}
			}
			if created {
				w.syncS = now
			} else {
				at = max(now, now+now/10000-w.syncS/10000)
			}
		} else {
			// from the first limit whose counter exists: its end less PTTL
			for i, l := range ls {
				if before[i] > 0 {
					stop := (l.idx(now) + 1) * l.P
					at = (stop - (stop*1000-now)/1000) * 1000
					if l.noTTL[wWin{l.P, l.idx(now)}] {
						at = now // repaired, and the clock read from TIME
					}
					break
				}
			}
		}
	}
	// FixedWindow / Optimistic: a writing call (cost > 0, not a peek)
	// repairs; its ResetAfter is then the Period
	if (w.k == wFW || w.k == wOpt) && !dry && cost > 0 {
		for _, l := range ls {
			if l.fwRepair(now) {
				l.E = now + l.P*1000
			}
		}
	}
	// Aligned: a denial gives the counters it finds their window's end
	if w.k == wAW && write && !allowed {
		for i, l := range ls {
			if before[i] > 0 {
				delete(l.noTTL, wWin{l.P, l.idx(now)})
			}
		}
	}
	// Bucketed: every counting transaction sets the expiry
	if w.k == wBK && write {
		for _, l := range ls {
			delete(l.noTTL, wWin{l.P, l.idx(now)})
		}
	}
	if allowed && write {
		for _, l := range ls {
			l.admit(now, cost)
		}
	}
	if w.k == wBK && write && !allowed {
		for _, l := range ls {
			l.written[wWin{l.P, l.idx(now)}] = true // counted and taken back
		}
	}
	per := make([]wPer, len(ls))
	for i, l := range ls {
		var p wPer
		p.rem = l.R - l.count(now)
		switch w.k {
		case wFW, wOpt:
			p.reset = l.fwTTL(now)
		case wAW:
			p.reset = l.winReset(now, at)
		case wBK:
			p.reset = l.winReset(now, now)
		}
		switch {
		case cost > l.R:
			p.retry = -1
		case before[i]+cost > l.R:
			p.retry = p.reset
		}
		per[i] = p
	}
	return wBind(per, allowed)
}

var (
	wSeeds   = flag.Int("wmodel.seeds", 3, "TestWindowStrategiesMatchModels: runs per strategy and number of limits")
	wOps     = flag.Int("wmodel.ops", 200, "TestWindowStrategiesMatchModels: calls per run")
	wSeed    = flag.Uint64("wmodel.seed", 1, "TestWindowStrategiesMatchModels: the first run's seed")
	wKinds   = flag.String("wmodel.kinds", "0123", "TestWindowStrategiesMatchModels: strategies, 0 FixedWindow, 1 Optimistic, 2 AlignedWindow, 3 Bucketed")
	wChanges = flag.Bool("wmodel.changes", true, "TestWindowStrategiesMatchModels: rule reloads (a new rate)")
	wPersist = flag.Bool("wmodel.persist", true, "TestWindowStrategiesMatchModels: keys stripped of their TTL")
	wDebug   = flag.Bool("wmodel.debug", false, "TestWindowStrategiesMatchModels: trace the commands of AllowMany")
	wSkew    = flag.Bool("wmodel.skew", false, "AlignedWindow and Bucketed: the app clock jumps")
	wStrict  = flag.Bool("wmodel.strict", false, "TestWindowStrategiesMatchModels: AlignedWindow's and Bucketed's RetryAfter honoured at fractional ms too (FixedWindow's and Optimistic's always are)")
)

var wPeriods = []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 7 * time.Millisecond, 10 * time.Millisecond, time.Second, 3 * time.Second, time.Minute, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, 31 * 24 * time.Hour}

func wRandLimit(r *rand.Rand, name string) limiter.Limit {
	var p time.Duration
	if r.IntN(5) == 0 {
		p = time.Duration(1+r.IntN(5000)) * time.Millisecond
	} else {
		p = wPeriods[r.IntN(len(wPeriods))]
	}
	rate := modelRates[r.IntN(len(modelRates))]
	if r.IntN(4) == 0 {
		rate = 1 + r.Int64N(40)
	}
	if r.IntN(20) == 0 {
		rate = []int64{1000, 1 << 20, 1 << 40, 1 << 50}[r.IntN(4)]
	}
	return limiter.Limit{Rate: rate, Period: p, Name: name}
}

func runWModel(t *testing.T, k wKind, seed uint64, nops int, two bool) {
	r := rand.New(rand.NewPCG(seed, 7))
	m := newWMini(t, time.UnixMilli(1_796_400_000_000+int64(seed)*7_919_113))
	// fractional: the clock may stand at fractions of a millisecond
	fractional := r.IntN(2) == 0
	if fractional {
		m.Advance(time.Duration(r.Int64N(1_000_000)) * time.Microsecond)
	} else {
		m.Advance(time.Duration(r.Int64N(1_000)) * time.Millisecond)
	}
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	var trace []string
	if *wDebug {
		rdb.AddHook(traceHook{&trace})
	}
	graceMs := int64(1000)
	var skew atomic.Int64 // µs the app clock is ahead of the server's
	appNow := func() time.Time { return m.Now().Add(time.Duration(skew.Load()) * time.Microsecond) }
	if !*wSkew {
		appNow = m.Now
	}
	var s limiter.Strategy
	switch k {
	case wFW:
		s = strategy.NewFixedWindow()
	case wOpt:
		s = strategy.NewOptimistic()
	case wAW:
		s = strategy.NewAlignedWindow(strategy.WithAlignedClock(appNow))
	case wBK:
		switch r.IntN(4) {
		case 0:
			s = strategy.NewBucketed(strategy.WithClock(appNow))
		case 1:
			graceMs = 0
			s = strategy.NewBucketed(strategy.WithClock(appNow), strategy.WithGrace(0))
		case 2:
			graceMs = 1
			s = strategy.NewBucketed(strategy.WithClock(appNow), strategy.WithGrace(time.Millisecond))
		default:
			graceMs = 5
			s = strategy.NewBucketed(strategy.WithClock(appNow), strategy.WithGrace(5*time.Millisecond))
		}
	}
	lim, err := limiter.New(goredis.New(rdb), s, limiter.WithPrefix("m"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := m.Now().UnixMicro()
	advanceTo := func(target int64) {
		if target > now {
			m.Advance(time.Duration(target-now) * time.Microsecond)
			now = target
		}
	}
	L := []limiter.Limit{wRandLimit(r, "a")}
	if two {
		L = append(L, wRandLimit(r, "b"))
	}
	// each named limit has a second rule it may be changed to (a reload)
	alt := make([]limiter.Limit, len(L))
	for j := range L {
		a := wRandLimit(r, L[j].Name)
		switch r.IntN(3) {
		case 0:
			a.Period = L[j].Period // the rate alone changes
		case 1:
			a.Rate = L[j].Rate // the period alone
		}
		alt[j] = a
	}
	subjects := []string{"s", "z"}
	world := &wWorld{k: k}
	lims := make([][]*wLim, 2)
	for si, subj := range subjects {
		for _, l := range L {
			key, err := limiter.Key("m", subj, l)
			if err != nil {
				t.Fatal(err)
			}
			lims[si] = append(lims[si], &wLim{k: k, R: l.Rate, P: l.Period.Milliseconds(), G: min(graceMs, l.Period.Milliseconds()), G0: graceMs, key: key, cnt: map[wWin]int64{}, written: map[wWin]bool{}, noTTL: map[wWin]bool{}})
		}
	}
	desc := fmt.Sprintf("%s seed=%d limits=%+v grace=%d", k, seed, L, graceMs)
	var log []string
	fail := func(format string, a ...any) {
		t.Helper()
		if n := len(log); n > 40 {
			log = log[n-40:]
		}
		for _, s := range log {
			t.Log(s)
		}
		t.Fatalf("%s: "+format, append([]any{desc}, a...)...)
	}
	pickSet := func() []int {
		if len(L) == 1 {
			return []int{0}
		}
		return [][]int{{0}, {1}, {1, 0}, {0, 1}}[r.IntN(4)]
	}
	maxR := int64(0)
	for _, l := range L {
		maxR = max(maxR, l.Rate)
	}
	pickCost := func(si int, set []int) int64 {
		l := lims[si][set[r.IntN(len(set))]]
		if r.IntN(2) == 0 {
			return r.Int64N(min(maxR, 200) + 2)
		}
		rem := l.R - l.count(now)
		c := []int64{0, 1, 2, l.R, l.R - 1, l.R + 1, rem, rem + 1}
		return max(c[r.IntN(len(c))], 0)
	}
	snapshot := func() map[string]wKey {
		out := map[string]wKey{}
		for _, key := range m.Keys() {
			v, _ := m.Get(key)
			out[key] = wKey{v, m.TTL(key)}
		}
		return out
	}
	wantKeys := func() map[string]wKey {
		out := map[string]wKey{}
		for si := range lims {
			for _, l := range lims[si] {
				l.keys(now, out)
			}
		}
		return out
	}
	type denial struct {
		ok    bool
		set   []int
		cost  int64
		retry int64
	}
	last := make([]denial, 2)
	check := func(si int, op string, set []int, cost int64, dry bool, res limiter.Result, err error) {
		t.Helper()
		if err != nil {
			fail("t=%d %s %s cost=%d set=%v: %v", now, subjects[si], op, cost, set, err)
		}
		ls := make([]*wLim, len(set))
		for i, j := range set {
			ls[i] = lims[si][j]
		}
		for _, l := range ls {
			switch k {
			case wFW, wOpt:
				if l.fwExists(now) && l.E-now < 1000 {
					wCov["pttl0"]++
				}
			default:
				if ((l.idx(now)+1)*l.P*1000)-now < 1000 {
					wCov["lastms"]++
				}
			}
		}
		repairPending := false
		for _, l := range ls {
			if (k == wFW || k == wOpt) && l.fwRepair(now) {
				repairPending = true
			}
		}
		want := world.decide(ls, now, cost, dry)
		switch {
		case want.allowed:
			wCov["allowed"]++
		case want.retry == -1:
			wCov["never"]++
		case len(set) == 2:
			wCov["deny2"]++
		default:
			wCov["deny1"]++
		}
		wCov[op]++
		got := wExpect{res.Allowed, res.Remaining, res.ResetAfter.Milliseconds(), res.RetryAfter.Milliseconds(), res.Index}
		if res.RetryAfter == -1 {
			got.retry = -1
		}
		log = append(log, fmt.Sprintf("t=%d(+%dus) %s %s cost=%d set=%v -> %+v ; model %+v", now/1000, now%1000, subjects[si], op, cost, set, got, want))
		if res.ResetAfter%time.Millisecond != 0 || res.RetryAfter > 0 && res.RetryAfter%time.Millisecond != 0 {
			fail("non-ms durations %+v", res)
		}
		if *wSkew && k == wAW {
			never := false
			for _, l := range ls {
				never = never || cost > l.R
			}
			switch {
			case dry || cost == 0 || never:
				got = want // read by the estimate
				res.RetryAfter = 0
			case want.allowed:
				got.reset, got.index = want.reset, want.index
			}
		}
		if got != want {
			log = append(log, fmt.Sprintf("keys now: %v", snapshot()))
			fail("t=%d(+%dus) %s %s cost=%d set=%v: got %+v, model %+v (cause %v)", now/1000, now%1000, subjects[si], op, cost, set, got, want, res.Cause)
		}
		if res.Limit != L[set[res.Index]] {
			fail("Limit %v != binding", res.Limit)
		}
		if res.Degraded || res.Cached || res.Leased || res.Cause != nil {
			fail("flags %+v", res)
		}
		// (FixedWindow's and Optimistic's RetryAfter is exact at any
		// fraction of a millisecond; the epoch-aligned ones' only with
		// -wmodel.strict)
		exactAlways := k == wFW || k == wOpt
		if !res.Allowed && res.RetryAfter > 0 && (*wStrict || !fractional || exactAlways) && !((dry || cost == 0) && repairPending) {
			R := res.RetryAfter.Milliseconds()
			fitsAt := func(t int64) bool {
				for _, l := range ls {
					if !l.fits(t, cost) {
						return false
					}
				}
				return true
			}
			if !fitsAt(now + 1000*R) {
				fail("t=%d(+%dus) %s %s cost=%d set=%v: RetryAfter %dms: the request does not fit then", now/1000, now%1000, subjects[si], op, cost, set, R)
			}
			if R > 1 && fitsAt(now+1000*(R-1)) {
				fail("t=%d(+%dus) %s %s cost=%d set=%v: RetryAfter %dms: it fits a ms earlier", now/1000, now%1000, subjects[si], op, cost, set, R)
			}
		}
		if !res.Allowed && res.RetryAfter > 0 {
			last[si] = denial{true, set, cost, res.RetryAfter.Milliseconds()}
		} else if res.Allowed {
			last[si].ok = false
		}
	}
	for op := 0; op < nops; op++ {
		si := 0
		if r.IntN(4) == 0 {
			si = 1
		}
		// time
		switch x := r.IntN(16); {
		case x < 3:
		case x < 5:
			advanceTo(now + 1000)
		case x < 6:
			l := L[r.IntN(len(L))]
			p := l.Period.Milliseconds()
			advanceTo(now + 1000*r.Int64N(max(p/max(l.Rate, 1), 1)+1))
		case x < 7:
			p := L[r.IntN(len(L))].Period.Milliseconds()
			advanceTo(now + 1000*r.Int64N(p+1))
		case x < 8:
			if last[si].ok && last[si].retry > 1 {
				advanceTo(now + 1000*(last[si].retry-1))
			}
		case x < 9:
			if last[si].ok && last[si].retry > 0 {
				advanceTo(now + 1000*last[si].retry)
			}
		case x < 10:
			if fractional {
				advanceTo((now/1000 + 1) * 1000) // back to whole ms
			}
		case x < 11:
			if fractional {
				advanceTo(now + 1 + r.Int64N(999))
			}
		default:
			// an edge: a window's end or a key's expiry
			l := lims[r.IntN(2)][r.IntN(len(L))]
			var edges []int64
			switch k {
			case wFW, wOpt:
				if l.fwExists(now) && l.E != wNever {
					edges = append(edges, l.E)
				}
			case wAW:
				edges = append(edges, (l.idx(now)+1)*l.P*1000)
			case wBK:
				b := l.idx(now)
				edges = append(edges, (b+1)*l.P*1000, ((b+1)*l.P+l.G)*1000, (b*l.P+l.G)*1000)
			}
			if len(edges) > 0 {
				e := edges[r.IntN(len(edges))]
				offs := []int64{-1000, 0, 1000}
				if fractional {
					offs = []int64{-1000, -500, -1, 0, 1, 500, 1000}
				}
				advanceTo(e + offs[r.IntN(len(offs))])
			}
		}
		if *wChanges && r.IntN(40) == 0 {
			j := r.IntN(len(L))
			L[j], alt[j] = alt[j], L[j]
			for si := range lims {
				lims[si][j].R, lims[si][j].P = L[j].Rate, L[j].Period.Milliseconds()
				lims[si][j].G = min(lims[si][j].G0, lims[si][j].P)
			}
			desc += fmt.Sprintf(" change@%d:%v", op, L[j])
			log = append(log, fmt.Sprintf("t=%d rule %d -> %v", now/1000, j, L[j]))
		}
		if *wPersist && !*wSkew && r.IntN(30) == 0 {
			// strip a key of its TTL (by hand)
			keys := m.Keys()
			if len(keys) > 0 {
				key := keys[r.IntN(len(keys))]
				if err := rdb.Persist(ctx, key).Err(); err != nil {
					fail("persist: %v", err)
				}
				log = append(log, fmt.Sprintf("t=%d PERSIST %s", now/1000, key))
				found := false
				for si := range lims {
					for _, l := range lims[si] {
						switch k {
						case wFW, wOpt:
							if l.key == key {
								l.E, found = wNever, true
							}
						case wAW:
							for w := range l.cnt {
								if strategy.AlignedWindowKey(l.key, time.Duration(w.P)*time.Millisecond, w.b) == key {
									l.noTTL[w], found = true, true
								}
							}
						case wBK:
							for w := range l.written {
								if l.key+":"+strconv.FormatInt(w.b, 10) == key {
									l.noTTL[w], found = true, true
								}
							}
						}
					}
				}
				if !found {
					fail("persist: no model for %s", key)
				}
			}
		}
		if *wSkew && r.IntN(8) == 0 {
			p := L[r.IntN(len(L))].Period.Microseconds()
			var j int64
			switch r.IntN(4) {
			case 0:
				j = 0
			case 1:
				j = r.Int64N(2*p+1) - p
			case 2:
				j = r.Int64N(4*p+1) - 2*p
			default:
				j = []int64{-5_000_000, 5_000_000, -1000, 1000, -1, 1}[r.IntN(6)]
			}
			if !fractional {
				j -= j % 1000
			}
			skew.Store(j)
			log = append(log, fmt.Sprintf("skew %dus", j))
		}
		set := pickSet()
		ls := make([]limiter.Limit, len(set))
		for i, j := range set {
			ls[i] = L[j]
		}
		subj := subjects[si]
		before := snapshot()
		x := r.IntN(22)
		var res limiter.Result
		var cost int64
		var dry bool
		var opname string
		if last[si].ok && r.IntN(3) == 0 {
			set = last[si].set
			ls = ls[:0]
			for _, j := range set {
				ls = append(ls, L[j])
			}
			cost, opname = last[si].cost, "AllowN(repeat)"
			res, err = lim.AllowN(ctx, subj, cost, ls...)
			check(si, opname, set, cost, false, res, err)
		} else {
			if *wSkew && x < 2 {
				x = 5 // Reset deletes around the estimate: not modelled under skew
			}
			switch {
			case x < 2:
				err = lim.Reset(ctx, subj, ls...)
				if world.k == wAW || world.k == wBK {
					if !world.synced {
						world.synced, world.syncS = true, now
					}
				}
				log = append(log, fmt.Sprintf("t=%d(+%dus) %s Reset %v -> %v", now/1000, now%1000, subj, set, err))
				if err != nil {
					fail("reset: %v", err)
				}
				for _, j := range set {
					lims[si][j].clear(now)
				}
				opname = "Reset"
			case x < 4:
				order := []int{0, 1}
				if r.IntN(2) == 0 {
					order = []int{1, 0}
				}
				if r.IntN(3) == 0 {
					order = order[:1]
				}
				if (k == wFW || k == wAW && !*wSkew) && r.IntN(3) == 0 {
					order = []int{order[0], order[0], order[0]}[:2+r.IntN(2)]
				}
				type info struct {
					si   int
					set  []int
					cost int64
				}
				var infos []info
				var asks []limiter.Ask
				for _, s2 := range order {
					st := pickSet()
					c := pickCost(s2, st)
					l2 := make([]limiter.Limit, len(st))
					for i, j := range st {
						l2[i] = L[j]
					}
					infos = append(infos, info{s2, st, c})
					asks = append(asks, limiter.Ask{Key: subjects[s2], Cost: c, Limits: l2})
				}
				if *wDebug {
					log = append(log, fmt.Sprintf("before AllowMany: keys %v", snapshot()))
				}
				trace = trace[:0]
				ans := lim.AllowMany(ctx, asks)
				if *wDebug {
					for _, tr := range trace {
						log = append(log, "  "+tr)
					}
				}
				for i, a := range ans {
					c := max(infos[i].cost, 1)
					check(infos[i].si, "AllowMany", infos[i].set, c, false, a.Result, a.Err)
				}
				opname = "AllowMany"
			case x < 7:
				cost, dry, opname = 1, true, "Peek"
				res, err = lim.Peek(ctx, subj, ls...)
				check(si, opname, set, cost, dry, res, err)
			case x < 9:
				cost, opname = 1, "Allow"
				res, err = lim.Allow(ctx, subj, ls...)
				check(si, opname, set, cost, dry, res, err)
			default:
				cost, opname = pickCost(si, set), "AllowN"
				res, err = lim.AllowN(ctx, subj, cost, ls...)
				check(si, opname, set, cost, dry, res, err)
			}
		}
		after := snapshot()
		want := wantKeys()
		cmp := after
		if *wSkew && k == wBK {
			cmp = map[string]wKey{}
			for key, v := range after {
				if _, ok := want[key]; !ok && v.val == "0" && v.ttl > 0 {
					continue // a wrong window's, counted and taken back
				}
				cmp[key] = v
			}
		}
		if fmt.Sprint(cmp) != fmt.Sprint(want) {
			fail("t=%d(+%dus) after %s: keys\n got  %v\n want %v\n before %v", now/1000, now%1000, opname, after, want, before)
		}
		for key, v := range after {
			if v.ttl <= 0 && want[key].ttl != 0 {
				fail("key %s without TTL", key)
			}
		}
		if (opname == "Peek" || cost == 0 && opname == "AllowN") && fmt.Sprint(after) != fmt.Sprint(before) {
			fail("%s wrote", opname)
		}
	}
}

// wCov counts what the runs did (calls at PTTL 0, in a window's last
// millisecond, denials of one limit and of two...), logged at the end, so
// that a change that stops reaching a case shows.
var wCov = map[string]int{}

// wMini is redistest.Mini from a fixed start, so that a seed's run is the
// same whatever the wall clock.
type wMini struct {
	*miniredis.Miniredis
	mu  sync.Mutex
	now time.Time
}

func newWMini(t *testing.T, start time.Time) *wMini {
	m := &wMini{Miniredis: miniredis.NewMiniRedis(), now: start}
	m.SetTime(start)
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func (m *wMini) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

func (m *wMini) Advance(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = m.now.Add(d)
	m.SetTime(m.now)
	m.FastForward(d)
}

// TestWindowStrategiesMatchModels drives FixedWindow, Optimistic,
// AlignedWindow and Bucketed, with one limit and with two, through random
// calls (Allow, AllowN, Peek, Reset, AllowMany) on miniredis's virtual
// clock, at whole and fractional milliseconds (a window's last millisecond,
// a key's expiry millisecond), with rule reloads and keys stripped of their
// TTL, and compares every decision (admitted, Remaining, ResetAfter,
// RetryAfter, the binding limit) and every key's value and TTL with the
// models of their docs. Deeper runs:
//
//	go test ./strategy -run WindowStrategiesMatchModels -wmodel.seeds 120 -wmodel.ops 400 [-wmodel.skew] [-wmodel.strict]
func TestWindowStrategiesMatchModels(t *testing.T) {
	defer func() { t.Logf("coverage %v", wCov) }()
	for _, c := range *wKinds {
		k := wKind(c - '0')
		for _, two := range []bool{false, true} {
			for s := *wSeed; s < *wSeed+uint64(*wSeeds); s++ {
				t.Run(fmt.Sprintf("%s/two=%v/seed=%d", k, two, s), func(t *testing.T) {
					runWModel(t, k, s, *wOps, two)
				})
			}
		}
	}
}

type traceHook struct{ out *[]string }

func (h traceHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h traceHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		*h.out = append(*h.out, fmt.Sprintf("%v", cmd.Args())+" => "+fmt.Sprint(cmd))
		return err
	}
}
func (h traceHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			a := cmd.Args()
			if len(a) > 1 {
				if s, ok := a[1].(string); ok && len(s) > 40 {
					a = append([]any{a[0], s[:12]}, a[2:]...)
				}
			}
			*h.out = append(*h.out, fmt.Sprintf("pipe %v => %v", a, cmd))
		}
		return err
	}
}
