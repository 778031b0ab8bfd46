package strategy_test

// The one-limit fast paths of token_bucket.lua, sliding_window.lua,
// gcra.lua and sliding_log.lua, rewritten for server time, compared on
// identical states and an identical (script-side) clock with
//   - the same script's general path (a second limit that never binds), and
//   - for GCRA and the sliding log, the scripts before that rewrite
//     (testdata/*_before_fastpath.lua), on both of their paths: a faster
//     script must answer, store and expire exactly as before (the token
//     bucket's and the sliding window's states changed form since: their
//     rules are tested by their own tests and the conformance suite),
// on miniredis (gopher-lua) and on a redis-server started by redistest.
// Random steps mix costs, peeks, clock moves (backwards too), rule changes
// on one key, values near 2^51 and 2^52, corrupt and foreign states with
// and without a TTL. -equivalence.full runs about ten times the steps.
//
// The scripts' clock: redis.call('TIME') is replaced, in every script
// alike, by two GETs of keys holding the seconds and microseconds as
// strings (as TIME returns them), so that every subject sees the same now.

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/redistest"
)

// fullEquivalence runs the random comparisons at about ten times the
// steps of a default run (which keeps the package's tests short under -race).
var fullEquivalence = flag.Bool("equivalence.full", false, "run the fast-path equivalence tests at full size")

// scaled is n for a full run, n/10 (at least 1) otherwise.
func scaled[T int | int64](n T) T {
	if *fullEquivalence || n < 10 {
		return n
	}
	return n / 10
}

// packedReplies counts packed (fast path) replies per subject, logged by
// the tests to show the fast path was exercised.
var packedReplies = map[string]int{}

const clkS, clkU = "__fastpath_clk_s", "__fastpath_clk_u"

func fixedClock(t *testing.T, src string) string {
	t.Helper()
	if !strings.Contains(src, "redis.call('TIME')") {
		t.Fatal("script has no TIME call")
	}
	return strings.ReplaceAll(src, "redis.call('TIME')", "{redis.call('GET', '"+clkS+"'), redis.call('GET', '"+clkU+"')}")
}

func readSrc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type equivalenceServer struct {
	name string
	rdb  *redis.Client
	real bool
	// mini is the miniredis (nil for a redis-server): walks move its key
	// expiry with their clock
	mini *redistest.Mini
	// spread is, on a real server, the longest a comparison's MULTI has
	// taken so far (ms, rounded up, plus 2): the subjects' keys are
	// written and read one after another on the real clock, so their TTLs
	// may differ by as much as the MULTI that last wrote them took (on a
	// loaded machine, more than a few ms).
	spread *int64
	// setSpread is the same for the MULTIs that plant states (setAll):
	// keys set one after another there differ in TTL by as much again.
	setSpread *int64
	// looseReset lets the subjects' reset_ms differ by as much as their
	// TTLs may (a script that reads its reply's reset off a PTTL on the
	// real clock)
	looseReset bool
}

// miniEquivalence starts a miniredis for one test and returns it and a
// client of it as a server of the comparisons.
func miniEquivalence(t *testing.T) (*redistest.Mini, equivalenceServer) {
	m, _ := newMini(t)
	mrdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = mrdb.Close() })
	return m, equivalenceServer{name: "miniredis", rdb: mrdb, mini: m, spread: new(int64)}
}

func equivalenceServers(t *testing.T) []equivalenceServer {
	_, msrv := miniEquivalence(t)
	return []equivalenceServer{msrv, {name: "redis-server", rdb: realServer(t), real: true, spread: new(int64), setSpread: new(int64)}}
}

// normErr maps a script error to what it means (error texts carry line
// numbers and SHAs that differ between script versions).
func normErr(err error) string {
	s := err.Error()
	switch {
	case strings.Contains(s, "corrupt counter"), strings.Contains(s, "not an integer"), strings.Contains(s, "would overflow"):
		// (INCRBY's own refusals, which the strategies report as
		// ErrCorruptCounter too)
		return "ERR corrupt"
	case strings.Contains(s, "WRONGTYPE"):
		return "ERR WRONGTYPE"
	}
	return "ERR other: " + s
}

type subject struct {
	name string
	src  string
	key  string
	two  bool // with the never-binding second limit
	// bound: the script's value in GCRA's millisecond form (9·10^15 +
	// ms) or microsecond form (8·10^15 + µs) is an upper bound of the time
	// left when it was written (its one-limit call counts a live key's
	// value up by what it moves the TAT), not its exact length: it may
	// exceed the others'
	bound bool
}

type snapshot struct {
	res, val string
	ttl      int64
	timed    bool // the key has a TTL (on a real server, ttl is offset back)
}

func (s snapshot) String() string { return fmt.Sprintf("%s | %q | pttl %d", s.res, s.val, s.ttl) }

// On a real server every TTL a script writes is offset by ttlOffset ms
// and every PTTL it reads is offset back (a local shadow of redis.call,
// the same for every script), so that no key expires on the real clock
// during the test: the scripts see the TTLs they wrote.
const ttlOffset = 1_000_000_000

const ttlShim = `
local R0 = redis
local redis = setmetatable({}, {__index = R0})
redis.call = function(...)
  local a = {...}
  local c = string.upper(a[1])
  for i = 2, #a - 1 do
    if a[i] == 'PX' then a[i + 1] = a[i + 1] + 1000000000 end
  end
  if c == 'PEXPIRE' then a[3] = a[3] + 1000000000 end
  local r = R0.call(unpack(a))
  if c == 'PTTL' and r >= 0 then r = r - 1000000000 end
  return r
end
`

const postScript = `
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then
  if string.find(v.err or '', 'WRONGTYPE') then v = '<ERR WRONGTYPE>' else v = '<ERR ' .. tostring(v.err) .. '>' end
elseif not v then
  v = '<nil>'
end
local t = redis.call('PTTL', KEYS[1])
return {v, t}
`

// runCompare runs one call on every subject and compares the results,
// values and TTLs. The call and the read of its key run in one MULTI (no
// key expires within it on Redis 7, so the TTL read is the one written).
// On a real server the scripts see their TTLs through ttlShim, and a key
// about to expire on the real clock is deleted for every subject, so that
// the next step starts from identical states.
func runCompare(t *testing.T, ctx context.Context, srv equivalenceServer, subs []subject, never string, args func(two bool) []string, base int64, what string) bool {
	t.Helper()
	var snaps []snapshot
	evs := make([]*redis.Cmd, len(subs))
	posts := make([]*redis.Cmd, len(subs))
	var start, end *redis.TimeCmd
	_, _ = srv.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if srv.real {
			start = p.Time(ctx)
		}
		for i, s := range subs {
			keys := []string{s.key}
			if s.two {
				p.Del(ctx, never)
				keys = append(keys, never)
			}
			as := args(s.two)
			a := make([]any, len(as))
			for i, x := range as {
				a[i] = x
			}
			src := s.src
			if srv.real {
				src = ttlShim + src
			}
			evs[i] = p.Eval(ctx, src, keys, a...)
			posts[i] = p.Eval(ctx, postScript, []string{s.key})
		}
		if srv.real {
			end = p.Time(ctx)
		}
		return nil
	})
	// (see equivalenceServer.spread; miniredis: exact)
	var tol int64
	if srv.real {
		t0, err0 := start.Result()
		t1, err1 := end.Result()
		if err0 != nil || err1 != nil {
			t.Fatalf("TIME around the calls: %v, %v", err0, err1)
		}
		*srv.spread = max(*srv.spread, (t1.Sub(t0)+time.Millisecond-1).Milliseconds()+2)
		tol = *srv.spread
		if srv.setSpread != nil {
			tol += *srv.setSpread
		}
	}
	for i := range subs {
		var res string
		if r, err := evs[i].Result(); err != nil {
			res = normErr(err)
		} else {
			switch x := r.(type) {
			case int64:
				packedReplies[subs[i].name]++
				res = fmt.Sprintf("1 %d %d 0", x%(base+1), x/(base+1))
			case []any:
				if len(x) < 4 {
					res = fmt.Sprintf("short %v", x)
				} else {
					res = fmt.Sprintf("%v %v %v %v", x[0], x[1], x[2], x[3])
				}
			default:
				res = fmt.Sprintf("odd %T %v", r, r)
			}
		}
		pr, err := posts[i].Slice()
		if err != nil || len(pr) != 2 {
			t.Fatalf("post: %v %v", pr, err)
		}
		ttl := pr[1].(int64)
		timed := ttl >= 0
		if srv.real && timed {
			ttl -= ttlOffset
		}
		snaps = append(snaps, snapshot{res, fmt.Sprint(pr[0]), ttl, timed})
	}
	if srv.real {
		// a TTL about to run out on the real clock (the scripts see it
		// offset): every subject's key goes, so the next step starts
		// from identical states
		for _, sn := range snaps {
			if sn.timed && sn.ttl <= 50 {
				_, _ = srv.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
					for _, s := range subs {
						p.Del(ctx, s.key)
					}
					return nil
				})
				break
			}
		}
	}
	ok := true
	for i := 1; i < len(snaps); i++ {
		a, b := snaps[0], snaps[i]
		d := a.ttl - b.ttl
		same := a.res == b.res
		if !same && srv.looseReset {
			same = sameButReset(a.res, b.res, tol)
		}
		if !same || !sameValue(subs[0], a.val, subs[i], b.val) || a.timed != b.timed || d > tol || -d > tol {
			ok = false
		}
	}
	if !ok {
		var sb strings.Builder
		for i, s := range subs {
			fmt.Fprintf(&sb, "\n  %-8s %s", s.name, snaps[i])
		}
		t.Errorf("%s: %s (TTLs may differ by %d ms)%s", srv.name, what, tol, sb.String())
		return false
	}
	return true
}

// sameValue reports whether subject a's value va and subject b's vb are
// the same state: equal, or, where one of them is a bound (see subject),
// both GCRA's millisecond form with the bound's at least the other's.
func sameValue(a subject, va string, b subject, vb string) bool {
	if va == vb || a.bound == b.bound {
		return va == vb
	}
	if b.bound {
		va, vb = vb, va
	}
	x, err1 := strconv.ParseInt(va, 10, 64)
	y, err2 := strconv.ParseInt(vb, 10, 64)
	if err1 != nil || err2 != nil || x < y {
		return false
	}
	// the millisecond form (9·10^15 + ms), or the microsecond form
	// (8·10^15 + µs, the last three digits the TAT's fraction of a
	// millisecond)
	const ms, us = 9_000_000_000_000_000, 8_000_000_000_000_000
	return y > ms && x < 1<<53 || y > us && x < ms && x%1000 == y%1000
}

// sameButReset reports whether two replies "allowed remaining reset
// retry" are the same but for resets at most tol apart, and retries (a
// denial's wait, read off the same PTTL) both positive and at most tol
// apart.
func sameButReset(a, b string, tol int64) bool {
	fa, fb := strings.Fields(a), strings.Fields(b)
	if len(fa) != 4 || len(fb) != 4 || fa[0] != fb[0] || fa[1] != fb[1] {
		return false
	}
	near := func(x, y string, positive bool) bool {
		u, err1 := strconv.ParseInt(x, 10, 64)
		v, err2 := strconv.ParseInt(y, 10, 64)
		return err1 == nil && err2 == nil && u-v <= tol && v-u <= tol && (!positive || u > 0 && v > 0)
	}
	return near(fa[2], fb[2], false) && (fa[3] == fb[3] || near(fa[3], fb[3], true))
}

// TestSameButReset: the loose comparison of replies read off a PTTL on
// the real clock lets resets and waits differ by tol, nothing else.
func TestSameButReset(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"0 0 96626 96626", "0 0 96625 96625", true},
		{"1 3 500 0", "1 3 502 0", true},
		{"1 3 500 0", "1 3 503 0", false},
		{"0 0 96626 96626", "0 0 96626 96622", false},
		{"0 0 100 -1", "0 0 100 1", false},
		{"0 0 100 0", "0 0 100 1", false},
		{"1 3 500 0", "1 4 500 0", false},
		{"1 3 500 0", "0 3 500 0", false},
		{"1 3 500 0", "1 3 500", false},
	} {
		if got := sameButReset(c.a, c.b, 2); got != c.want {
			t.Errorf("sameButReset(%q, %q, 2) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// setAll sets every subject's key to v (a list holding v when wrongType),
// with a TTL of px ms when px > 0. On a real server the subjects' TTLs may
// differ by as much as its MULTI took, which srv.spread takes in.
func setAll(ctx context.Context, srv equivalenceServer, subs []subject, v string, px int64, wrongType bool) {
	if srv.real && px > 0 {
		px += ttlOffset
	}
	var start, end *redis.TimeCmd
	defer func() {
		if start == nil {
			return
		}
		t0, err0 := start.Result()
		t1, err1 := end.Result()
		if err0 == nil && err1 == nil {
			*srv.setSpread = max(*srv.setSpread, (t1.Sub(t0)+time.Millisecond-1).Milliseconds()+1)
		}
	}()
	_, _ = srv.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if srv.setSpread != nil {
			start = p.Time(ctx)
			defer func() { end = p.Time(ctx) }()
		}
		for _, s := range subs {
			p.Del(ctx, s.key)
			if wrongType {
				p.RPush(ctx, s.key, v)
			} else if px > 0 {
				p.Do(ctx, "SET", s.key, v, "PX", px)
			} else {
				p.Set(ctx, s.key, v, 0)
			}
		}
		return nil
	})
}

func setClock(ctx context.Context, rdb *redis.Client, nowUs int64) {
	rdb.Set(ctx, clkS, strconv.FormatInt(nowUs/1_000_000, 10), 0)
	rdb.Set(ctx, clkU, strconv.FormatInt(nowUs%1_000_000, 10), 0)
}

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.Intn(len(xs))] }

const (
	two51 = int64(1) << 51
	two52 = int64(1) << 52
	day   = int64(86_400_000_000)
)

// ---------------------------------------------------------------- token bucket

type tbLimit struct{ rate, period, cap int64 }

func randTBLimit(rng *rand.Rand) tbLimit {
	period := pick(rng, []int64{1000, 2000, 999_000, 1_000_000, 1_001_000, 60_000_000, 3_600_000_000, day, 31 * day, 1_048_576_000})
	rate := pick(rng, []int64{1, 2, 3, 7, 10, 999, 1000, 1_000_000, 1_000_000_007, 1 << 40, 1<<50 - 1, 1 << 50})
	max := two51 / period
	if max > 1<<50 {
		max = 1 << 50
	}
	var c int64
	switch rng.Intn(4) {
	case 0:
		c = max // B*P at its bound, near 2^51
	case 1:
		c = 1
	default:
		c = 1 + rng.Int63n(min(max, 20))
	}
	return tbLimit{rate, period, c}
}

// msForm reports whether l's interval (Period/Rate) is whole
// milliseconds: its bucket is "<d>/<R>/<P>/<B>", read off the key's PTTL.
func (l tbLimit) msForm() bool { return l.period%(l.rate*1000) == 0 }

// tbMsValue returns a bucket in the millisecond form, "<d>/<R>/<P>/<B>",
// of l's scale or another (another rate, period or burst; the same
// interval in other terms), or one that is not a bucket.
func tbMsValue(rng *rand.Rand, l tbLimit) string {
	r, p, b := l.rate, l.period, l.cap
	if !l.msForm() {
		r = 1
	}
	switch rng.Intn(5) {
	case 0:
		s := pick(rng, []struct{ r, p int64 }{{1, 1000}, {1, 7000}, {10, 1_000_000}, {1, day}, {1, 31 * day}, {3, 3_000_000}})
		r, p = s.r, s.p
	case 1:
		b = pick(rng, []int64{1, b + 1, max(b-1, 1), 1 << 30, two51})
	case 2:
		r, p = 2*r, 2*p // the same interval
		if p > 31*day {
			r, p = l.rate, l.period
		}
	}
	i := p / r / 1000
	d := pick(rng, []int64{1, i, i * b, i*b + 1, 1 + rng.Int63n(max(1, min(i*b, 1<<40))), 999_999_999_999_999})
	D, R, P, B := strconv.FormatInt(d, 10), strconv.FormatInt(r, 10), strconv.FormatInt(p, 10), strconv.FormatInt(b, 10)
	tail := "/" + R + "/" + P + "/" + B
	if rng.Intn(6) == 0 {
		return pick(rng, []string{"0" + tail, D + "/0/" + P + "/" + B, D + "/" + R + "/0/" + B, D + "/" + R + "/" + P + "/0", "0" + D + tail,
			D + "/0" + R + "/" + P + "/" + B, D + "/" + R + "/" + P, D + tail + "/1", D + "/1/2678400001000/" + B, D + "/" + R + "/" + P + "/2251799813685249",
			D + tail + " ", D + "/3/1000/" + B, D + "/7/1000000/" + B, strings.Repeat("1", 50) + tail, strings.Repeat("1", 80) + "/1/1000/1",
			"-" + D + tail, D + "/" + R + "/" + P + "/1e3", D + "/" + B})
	}
	return D + tail
}

// tbValue returns a bucket state to plant: one in any form (on a
// redis-server, real, only the one on TIME: the others are read off a PTTL,
// on the real clock), of l's scale or another, or one that is not a bucket.
func tbValue(rng *rand.Rand, now int64, l tbLimit, real bool) (v string, wrongType bool) {
	if !real {
		switch rng.Intn(6) {
		case 0, 1:
			return tbMsValue(rng, l), false
		case 2, 3:
			return tbUsValue(rng, l), false
		}
	}
	ts := pick(rng, []int64{now, now - rng.Int63n(10_000_000), now + rng.Int63n(10_000_000), now - rng.Int63n(40*day), 1, now - 1})
	full := l.cap * l.period
	sv := pick(rng, []int64{0, rng.Int63n(full + 1), full, full - 1, full + 1, two51, two51 + 1, two51 - 1, two52, l.period})
	pv := pick(rng, []int64{l.period, l.period, 1_000_000, 1000, 999_000, 31 * day, 31*day + 1, 0})
	T, S, P := strconv.FormatInt(ts, 10), strconv.FormatInt(sv, 10), strconv.FormatInt(pv, 10)
	switch rng.Intn(16) {
	case 0:
		return T + ":" + S, false // two parts
	case 1:
		return "0" + T + ":" + S + ":" + P, false
	case 2:
		return T + ":0" + S + ":" + P, false
	case 3:
		return T + ":" + S + ":0" + P, false
	case 4:
		return "1" + T + ":" + S + ":" + P, false // 17 digits
	case 5:
		return T + ":" + "12345678901234567" + ":" + P, false
	case 6:
		return pick(rng, []string{"0:0:" + P, "0:" + S + ":" + P, T + ":0:" + P, T + ":" + S + ":0", "0:0", T + ":0", "0:" + S, "00:0:" + P, T + ":00:" + P}), false
	case 7:
		return pick(rng, []string{"", "abc", "1:2:3:4", "-1:2:" + P, T + ":" + S + ":" + P + " ", " " + T + ":" + S + ":" + P, T + ".5:" + S + ":" + P, T + ":" + S + ":1e6", "0x10:1:" + P}), false
	case 8:
		return T + ":" + S + ":" + P, true
	case 9:
		return T + ":" + S + ":" + strconv.FormatInt(l.period, 10) + "0", false // another period: 10x
	}
	return T + ":" + S + ":" + P, false
}

// tbUsValue returns a bucket "<9·10^15 + px>:<s>:<P>" (the microsecond
// form on the millisecond clock) of l's period or another, or one that is
// not a bucket.
func tbUsValue(rng *rand.Rand, l tbLimit) string {
	full := l.cap * l.period
	u := 1000 * l.rate
	px := pick(rng, []int64{1, 2, (full + u - 1) / u, 1 + rng.Int63n(max(1, min((full+u-1)/u, 1<<40))), 999_999_999_999_999})
	sv := pick(rng, []int64{0, rng.Int63n(full + 1), full, full - 1, full + 1, two51, two51 + 1, l.period})
	pv := pick(rng, []int64{l.period, l.period, l.period, 1_000_000, 1000, 999_000, 31 * day, 31*day + 1, 0})
	T, S, P := strconv.FormatInt(9_000_000_000_000_000+px, 10), strconv.FormatInt(sv, 10), strconv.FormatInt(pv, 10)
	if rng.Intn(6) == 0 {
		return pick(rng, []string{"9" + T + ":" + S + ":" + P, T + ":0" + S + ":" + P, T + ":" + S + ":0" + P, T + ":" + S,
			"09000000000000001:" + S + ":" + P, T + ":" + S + ":" + P + ":1", T + ":-" + S + ":" + P})
	}
	return T + ":" + S + ":" + P
}

// tbPX returns the TTL to plant a bucket v with: for one in the
// microsecond form on the millisecond clock, most often no more than the
// expiry it says it was written with (the time since is the difference),
// sometimes a little more (a TTL it cannot have been written with), else
// px as drawn.
func tbPX(rng *rand.Rand, v string, px int64) int64 {
	a, _, ok := strings.Cut(v, ":")
	x, err := strconv.ParseInt(a, 10, 64)
	if !ok || err != nil || x < 9_000_000_000_000_000 || px == 0 {
		return px
	}
	written := x - 9_000_000_000_000_000
	switch rng.Intn(5) {
	case 0:
		return px
	case 1:
		return written + 1 + rng.Int63n(3)
	}
	return max(1, min(px, written-rng.Int63n(3)))
}

func tbArgs(l tbLimit, cost int64, peek bool) func(two bool) []string {
	return func(two bool) []string {
		var a []string
		if cost != 1 || peek {
			p := "0"
			if peek {
				p = "1"
			}
			a = append(a, strconv.FormatInt(cost, 10), p)
		}
		a = append(a, strconv.FormatInt(l.rate, 10), strconv.FormatInt(l.period, 10), strconv.FormatInt(l.cap, 10))
		if two {
			a = append(a, "1", "1", strconv.FormatInt(two51, 10))
		}
		return a
	}
}

// tbSubjects: the token bucket's script alone (one limit: its fast path,
// for a cost it can fit that writes) and with a second limit that never
// binds (its general path).
func tbSubjects(t *testing.T) []subject {
	t.Helper()
	src := fixedClock(t, readSrc(t, "lua/token_bucket.lua"))
	return []subject{{name: "one", src: src, key: "rv:tb:one"}, {name: "two", src: src, key: "rv:tb:two", two: true}}
}

// pathSubjects returns the four subjects a comparison runs on for the
// script lua/<name>.lua: it and testdata/<name>_before_fastpath.lua, each
// alone (one limit) and with a second limit that never binds, keys named
// "rv:<tag>:...".
func pathSubjects(t *testing.T, name, tag string) []subject {
	t.Helper()
	newSrc := fixedClock(t, readSrc(t, "lua/"+name+".lua"))
	oldSrc := fixedClock(t, readSrc(t, "testdata/"+name+"_before_fastpath.lua"))
	return []subject{
		{name: "new/one", src: newSrc, key: "rv:" + tag + ":new1"},
		{name: "new/two", src: newSrc, key: "rv:" + tag + ":new2", two: true},
		{name: "old/one", src: oldSrc, key: "rv:" + tag + ":old1"},
		{name: "old/two", src: oldSrc, key: "rv:" + tag + ":old2", two: true},
	}
}

// walk is what a random comparison of one script's paths varies: its
// limit (L), the clock moves it makes, the states it plants and the call's
// arguments.
type walk[L any] struct {
	subs  []subject
	never string // the second limit's key, which never binds
	limit func(rng *rand.Rand) L
	// rate returns l with another rate (same key), or l as it is
	rate func(rng *rand.Rand, l L) L
	// realLimit reports whether l runs on a redis-server: limits it
	// refuses are drawn again there (those whose states are read off a
	// PTTL, which each subject would read on the real clock a moment
	// apart); nil: the walk runs on miniredis alone
	realLimit func(l L) bool
	moves     func(rng *rand.Rand, l L) []int64 // forward clock moves, µs
	// value returns a state to plant (on a redis-server, real: none read
	// off a PTTL)
	value func(rng *rand.Rand, nowUs int64, l L, real bool) (v string, wrongType bool)
	// px, if not nil, returns the TTL to plant v with instead of the
	// random px (0: none)
	px    func(rng *rand.Rand, v string, px int64) int64
	costs func(rng *rand.Rand, l L) []int64 // other than 1
	args  func(l L, cost int64, peek bool) func(two bool) []string
	base  func(l L) int64 // the packed reply's base
}

// run makes random steps (costs, peeks, clock moves back and forth, limit
// and rate changes on the same key, planted states with and without a TTL,
// PERSIST) on every server: every subject must agree on the reply, the
// value and its TTL at each call. On miniredis a forward move of the
// scripts' clock moves key expiry too, by the whole milliseconds it
// crosses, as a redis-server's millisecond clock does.
func (w walk[L]) run(t *testing.T) {
	ctx := context.Background()
	for k := range packedReplies {
		delete(packedReplies, k)
	}
	defer func() { t.Logf("packed (fast path) replies: %v", packedReplies) }()
	for _, srv := range equivalenceServers(t) {
		if srv.real && w.realLimit == nil {
			continue
		}
		// states planted with a TTL are read off their PTTL on the real
		// clock: resets and waits may differ as the TTLs may
		srv.looseReset = srv.real
		t.Run(srv.name, func(t *testing.T) {
			fails := 0
			seeds := scaled(int64(40))
			steps := 400
			if srv.real {
				seeds, steps = scaled(int64(25)), 300
			}
			for seed := int64(1); seed <= seeds && fails < 5; seed++ {
				rng := rand.New(rand.NewSource(seed))
				now := int64(1_764_000_000_000_000) + rng.Int63n(1_000_000_000_000)
				for _, s := range w.subs {
					srv.rdb.Del(ctx, s.key)
				}
				draw := func(next func() L) L {
					l := next()
					for srv.real && !w.realLimit(l) {
						l = next()
					}
					return l
				}
				l := draw(func() L { return w.limit(rng) })
				for step := 0; step < steps && fails < 5; step++ {
					switch op := rng.Intn(20); {
					case op < 3:
						d := pick(rng, w.moves(rng, l))
						// key expiry moves as a redis-server's does, on
						// the millisecond clock (the µs clock's whole
						// milliseconds): a TTL is always whole ms
						if srv.mini != nil {
							srv.mini.Advance(time.Duration((now+d)/1000-now/1000) * time.Millisecond)
						}
						now += d
					case op == 3:
						now -= rng.Int63n(2_000_000) // clock steps back
					case op == 4:
						l = draw(func() L { return w.limit(rng) })
					case op == 5:
						l0 := l
						l = draw(func() L { return w.rate(rng, l0) })
					case op == 6:
						v, wt := w.value(rng, now, l, srv.real)
						px := int64(0)
						if rng.Intn(2) == 0 {
							px = 1 + rng.Int63n(100_000_000)
						}
						if w.px != nil {
							px = w.px(rng, v, px)
						}
						setAll(ctx, srv, w.subs, v, px, wt)
					case op == 7:
						persistAll(ctx, srv, w.subs)
					default:
						cost := int64(1)
						peek := false
						if op >= 15 {
							cost = pick(rng, w.costs(rng, l))
							peek = op == 19
						}
						setClock(ctx, srv.rdb, now)
						what := fmt.Sprintf("seed %d step %d now %dus limit %+v cost %d peek %v", seed, step, now, l, cost, peek)
						if !runCompare(t, ctx, srv, w.subs, w.never, w.args(l, cost, peek), w.base(l), what) {
							fails++
							// resynchronise from the general path's state
							v, _ := srv.rdb.Get(ctx, w.subs[len(w.subs)-1].key).Result()
							setAll(ctx, srv, w.subs, v, 0, false)
						}
					}
				}
			}
		})
	}
}

// TestFastPathTokenBucketPaths: random steps (clock moves of microseconds
// to weeks, buckets near 2^51, periods up to 31 days, intervals of whole
// milliseconds or not, rule changes on one key, corrupt and foreign
// values); the fast path and the general path must agree on the reply,
// the value and its TTL. On miniredis, whose clock moves by Advance: both
// forms of the bucket are read off a PTTL, which each subject would read
// on a redis-server's real clock a moment apart (TestFastPathTokenBucketSmall
// runs there, from states read on TIME or none).
func TestFastPathTokenBucketPaths(t *testing.T) {
	walk[tbLimit]{
		subs:  tbSubjects(t),
		never: "rv:tb:never",
		limit: randTBLimit,
		rate: func(rng *rand.Rand, l tbLimit) tbLimit {
			l.rate = randTBLimit(rng).rate
			return l
		},
		moves: func(rng *rand.Rand, l tbLimit) []int64 {
			return []int64{0, 1, 999, 1000, rng.Int63n(1000), rng.Int63n(1_000_000), rng.Int63n(l.period + 1), rng.Int63n(40 * day)}
		},
		value: tbValue,
		px:    tbPX,
		costs: func(rng *rand.Rand, l tbLimit) []int64 {
			return []int64{0, 2, 1 + rng.Int63n(l.cap+1), l.cap, l.cap + 1}
		},
		args: tbArgs,
		base: func(l tbLimit) int64 { return l.cap },
	}.run(t)
}

// ---------------------------------------------------------------- sliding window

type swLimit struct{ rate, period int64 } // period in ms

// swMaxRate is the largest rate a sliding window's state holds.
const swMaxRate = 1<<26 - 1

func randSWLimit(rng *rand.Rand) swLimit {
	period := pick(rng, []int64{1, 2, 10, 999, 1000, 1001, 60_000, 3_600_000, 86_400_000, 31 * 86_400_000})
	return swLimit{randSize(rng, min(two51/period, swMaxRate)), period}
}

// randSize returns a rate or burst of at most max (and 2^50): max itself,
// 1, or a small one, each as often as the other two together.
func randSize(rng *rand.Rand, max int64) int64 {
	max = min(max, 1<<50)
	switch rng.Intn(4) {
	case 0:
		return max
	case 1:
		return 1
	}
	return 1 + rng.Int63n(min(max, 20))
}

// swValue returns a state previous·2^27 + count, or one that is not a
// state (a count of 2^26, a value beyond 2^53 - 1, text INCRBY refuses or
// accepts but the script does not).
func swValue(rng *rand.Rand, l swLimit) (string, bool) {
	c := pick(rng, []int64{0, 1, rng.Int63n(l.rate + 1), l.rate, l.rate + 1, swMaxRate, swMaxRate + 1})
	p := pick(rng, []int64{0, 1, rng.Int63n(l.rate + 1), l.rate, l.rate + 1, swMaxRate})
	V := strconv.FormatInt(p<<27+c, 10)
	switch rng.Intn(10) {
	case 0:
		return pick(rng, []string{"0", "0" + V, V + " ", " " + V, "-" + V, "1.5", "1e3", "0x10", "", "x", "1:2:3",
			"9007199254740991", "9007199254740992", "12345678901234567", "134217727", "134217728"}), false
	case 1:
		return V, true
	}
	return V, false
}

func swArgs(l swLimit, cost int64, peek bool) func(two bool) []string {
	return func(two bool) []string {
		var a []string
		if cost != 1 || peek {
			p := "0"
			if peek {
				p = "1"
			}
			a = append(a, strconv.FormatInt(cost, 10), p)
		}
		a = append(a, strconv.FormatInt(l.rate, 10), strconv.FormatInt(l.period, 10))
		if two {
			// a second limit that never binds (its key is deleted before
			// every call): any cost up to the first limit's rate fits
			a = append(a, strconv.FormatInt(swMaxRate, 10), "1")
		}
		return a
	}
}

// swSubjects: the sliding window's script alone (one limit: its fast path,
// for a cost it can fit that writes) and with a second limit that never
// binds (its general path). Its clock is the key's expiry: no TIME.
func swSubjects(t *testing.T) []subject {
	t.Helper()
	src := readSrc(t, "lua/sliding_window.lua")
	if strings.Contains(src, "TIME") {
		t.Fatal("the sliding window's script reads TIME")
	}
	return []subject{{name: "one", src: src, key: "rv:sw:one"}, {name: "two", src: src, key: "rv:sw:two", two: true}}
}

// TestFastPathSlidingWindowPaths: random steps (clock moves of a
// millisecond to weeks, rates near 2^26, periods of 1 ms to 31 days, rate
// and period changes on one key, planted states with and without a TTL,
// PERSIST, corrupt and foreign values, costs of 0 to rate + 1, peeks); the
// one-limit fast path and the general path must agree on the reply, the
// value and its TTL. It runs on miniredis, whose clock (key expiry) moves
// only through Advance: on a redis-server each subject would read the real
// clock a moment apart, and a millisecond moves a decision. The named
// states of TestFastPathCorruptValues (positions that do not depend on the
// clock) and TestSlidingWindowRealServer run the script on a redis-server.
func TestFastPathSlidingWindowPaths(t *testing.T) {
	ctx := context.Background()
	for k := range packedReplies {
		delete(packedReplies, k)
	}
	defer func() { t.Logf("packed (fast path) replies: %v", packedReplies) }()
	subs := swSubjects(t)
	m, msrv := miniEquivalence(t)
	for _, srv := range []equivalenceServer{msrv} {
		t.Run(srv.name, func(t *testing.T) {
			fails := 0
			for seed := int64(1); seed <= scaled(int64(40)) && fails < 5; seed++ {
				rng := rand.New(rand.NewSource(seed))
				delAll(ctx, srv, subs)
				l := randSWLimit(rng)
				for step := 0; step < 400 && fails < 5; step++ {
					switch op := rng.Intn(20); {
					case op < 3:
						d := pick(rng, []int64{1, 999, 1000, rng.Int63n(1000), rng.Int63n(1_000_000), rng.Int63n(l.period*1000 + 1), rng.Int63n(l.period*3000 + 1), rng.Int63n(40 * day)})
						m.Advance(time.Duration(d) * time.Microsecond)
					case op == 4:
						l = randSWLimit(rng)
					case op == 5:
						if r := randSWLimit(rng).rate; r <= two51/l.period {
							l.rate = r // R * P <= 2^51, as the caller bounds it
						}
					case op == 6:
						v, wt := swValue(rng, l)
						if strings.HasPrefix(v, "0") && v != "0" {
							v = v[1:] // (miniredis's INCRBY reads a leading zero; Redis refuses it)
						}
						px := int64(0)
						switch rng.Intn(4) {
						case 0:
							px = 1 + rng.Int63n(100_000_000)
						case 1, 2:
							px = 1 + rng.Int63n(2*l.period+1)
						}
						setAll(ctx, srv, subs, v, px, wt)
					case op == 7:
						persistAll(ctx, srv, subs)
					default:
						cost := int64(1)
						peek := false
						if op >= 15 {
							cost = pick(rng, []int64{0, 2, 1 + rng.Int63n(l.rate+1), l.rate, l.rate + 1})
							peek = op == 19
						}
						what := fmt.Sprintf("seed %d step %d limit %+v cost %d peek %v", seed, step, l, cost, peek)
						if !runCompare(t, ctx, srv, subs, "rv:sw:never", swArgs(l, cost, peek), l.rate, what) {
							fails++
							v, _ := srv.rdb.Get(ctx, subs[1].key).Result()
							setAll(ctx, srv, subs, v, 0, false)
						}
					}
				}
			}
		})
	}
}

// TestFastPathSlidingWindowSmall: small rates and periods, so that the
// weighting's rounding boundaries are hit often; each call starts from a
// state planted at a random position in its windows (or none), the same
// for every subject. On miniredis, as TestFastPathSlidingWindowPaths.
func TestFastPathSlidingWindowSmall(t *testing.T) {
	ctx := context.Background()
	subs := swSubjects(t)
	_, msrv := miniEquivalence(t)
	for _, srv := range []equivalenceServer{msrv} {
		t.Run(srv.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(98))
			fails := 0
			for i := 0; i < scaled(3000) && fails < 5; i++ {
				l := swLimit{1 + rng.Int63n(6), pick(rng, []int64{1, 2, 3, 5, 7, 1000})}
				if rng.Intn(8) > 0 {
					v := rng.Int63n(l.rate+2)<<27 + rng.Int63n(l.rate+2)
					setAll(ctx, srv, subs, strconv.FormatInt(v, 10), 1+rng.Int63n(2*l.period+2), false)
				} else {
					delAll(ctx, srv, subs)
				}
				cost := int64(1)
				if rng.Intn(4) == 0 {
					cost = 1 + rng.Int63n(l.rate+1)
				}
				if !runCompare(t, ctx, srv, subs, "rv:sw:never", swArgs(l, cost, false), l.rate, fmt.Sprintf("i %d limit %+v cost %d", i, l, cost)) {
					fails++
				}
			}
		})
	}
}

// ---------------------------------------------------------------- GCRA

type gcraLimit struct{ interval, burst int64 } // interval in µs

// randGCRALimit draws a limit: of whole milliseconds only when msOnly
// (those the scripts before the fast path hold as now; any other they
// held on TIME, as a TAT since the Unix epoch).
func randGCRALimit(rng *rand.Rand, msOnly bool) gcraLimit {
	ivs := []int64{1000, 2000, 100_000, 1_000_000, 60_000_000, 3_600_000_000, 2_678_400_000_000}
	if !msOnly {
		ivs = append(ivs, 1, 2, 999, 1001, 1002, 333_334, 1_000_001, 2_678_400_000_001)
	}
	iv := pick(rng, ivs)
	return gcraLimit{iv, randSize(rng, int64(3_153_600_000_000_000)/iv)} // MaxRefill
}

// gcraValue draws a state for l's key: a TAT since the Unix epoch (as
// releases before held limits not of whole milliseconds), the millisecond
// form, with band the microsecond form (8·10^15 + the µs left; the scripts
// before read it as a TAT in 2223), or something corrupt; and whether it
// is a list.
func gcraValue(rng *rand.Rand, nowUs int64, l gcraLimit, usOnly, band bool) (string, bool) {
	far := int64(7_999_999_999_999_999) // a TAT in 2223
	if band {
		far = 8_999_999_999_999_999 // the microsecond form's last
	}
	tat := pick(rng, []int64{nowUs, nowUs + rng.Int63n(l.interval*l.burst+1), nowUs + l.interval*l.burst + 1, nowUs - rng.Int63n(10_000_000), 1, far})
	v := strconv.FormatInt(tat, 10)
	switch rng.Intn(10) {
	case 3, 4:
		if band {
			return strconv.FormatInt(8_000_000_000_000_000+pick(rng, []int64{0, 1, 999, rng.Int63n(l.interval*l.burst + 2), l.interval * l.burst, 999_999_999_999_999}), 10), false
		}
	case 0:
		if !usOnly {
			return strconv.FormatInt(9_000_000_000_000_000+rng.Int63n(l.interval*l.burst/1000+2), 10), false
		}
	case 1:
		bad := []string{"0", "0" + v, "1" + v + "1", "9007199254740993", "-1", "1.5", "", "x", v + " ", "1e15", "0x10"}
		if !usOnly {
			// (a millisecond-form state is read by PTTL: on the real
			// clock the subjects would read it a millisecond apart)
			bad = append(bad, "9000000000000000")
		}
		return pick(rng, bad), false
	case 2:
		return v, true
	}
	return v, false
}

func gcraArgs(l gcraLimit, cost int64, peek bool) func(two bool) []string {
	return func(two bool) []string {
		var a []string
		if cost != 1 || peek {
			p := "0"
			if peek {
				p = "1"
			}
			a = append(a, strconv.FormatInt(cost, 10), p)
		}
		a = append(a, strconv.FormatInt(l.interval, 10), strconv.FormatInt(l.burst, 10))
		if two {
			a = append(a, "1", strconv.FormatInt(1<<50, 10))
		}
		return a
	}
}

// TestFastPathGCRAPaths: as TestFastPathTokenBucketPaths for GCRA, on
// miniredis, whose clock (TIME and key expiry) moves through Advance: the
// scripts before the fast path beside the new one for limits of whole
// milliseconds (any other they held on TIME, in another form), and the new
// script's two paths alone for every limit. A redis-server (a real clock
// for PTTL, which each subject reads a moment apart) runs
// TestFastPathGCRAFromTIME.
func TestFastPathGCRAPaths(t *testing.T) {
	ctx := context.Background()
	for k := range packedReplies {
		delete(packedReplies, k)
	}
	defer func() { t.Logf("packed (fast path) replies: %v", packedReplies) }()
	all := pathSubjects(t, "gcra", "g")
	all[0].bound = true
	m, srv := miniEquivalence(t)
	for _, w := range []struct {
		name   string
		subs   []subject
		msOnly bool
	}{{"before", all, true}, {"paths", all[:2], false}} {
		t.Run(w.name, func(t *testing.T) {
			subs := w.subs
			fails := 0
			for seed := int64(1); seed <= scaled(int64(30)) && fails < 5; seed++ {
				rng := rand.New(rand.NewSource(seed))
				for _, s := range subs {
					srv.rdb.Del(ctx, s.key)
				}
				clock := func() int64 { return m.Now().UnixMicro() }
				l := randGCRALimit(rng, w.msOnly)
				for step := 0; step < 300 && fails < 5; step++ {
					switch op := rng.Intn(20); {
					case op < 3:
						d := pick(rng, []int64{0, 1, 999, 1000, rng.Int63n(1000), rng.Int63n(1_000_000), rng.Int63n(l.interval*3 + 1), rng.Int63n(40 * day)})
						m.Advance(time.Duration(d) * time.Microsecond)
					case op == 4:
						l = randGCRALimit(rng, w.msOnly)
					case op == 6:
						v, wt := gcraValue(rng, clock(), l, false, !w.msOnly)
						px := int64(0)
						if rng.Intn(3) > 0 {
							px = 1 + rng.Int63n(100_000_000)
						}
						setAll(ctx, srv, subs, v, consistentPX(v, px), wt)
					case op == 7:
						persistSame(ctx, srv, subs, 1)
					default:
						cost := int64(1)
						peek := false
						if op >= 15 {
							cost = pick(rng, []int64{0, 2, 1 + rng.Int63n(l.burst+1), l.burst, l.burst + 1})
							peek = op == 19
						}
						setClock(ctx, srv.rdb, clock())
						what := fmt.Sprintf("seed %d step %d now %dus limit %+v cost %d peek %v", seed, step, clock(), l, cost, peek)
						if !runCompare(t, ctx, srv, subs, "rv:g:never", gcraArgs(l, cost, peek), l.burst, what) {
							fails++
							v, _ := srv.rdb.Get(ctx, subs[len(subs)-1].key).Result()
							setAll(ctx, srv, subs, v, 0, false)
						}
					}
				}
			}
		})
	}
}

// consistentPX returns the TTL a state v planted with a TTL of px ms may
// have as the script writes it: the millisecond and microsecond forms hold
// at least the time their TTL leaves (the one-limit call keeps them an
// upper bound of it, which sameValue checks).
func consistentPX(v string, px int64) int64 {
	x, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil || px == 0:
		return px
	case x >= 9_000_000_000_000_000 && x < 1<<53:
		return min(px, x-9_000_000_000_000_000)
	case x >= 8_000_000_000_000_000 && x < 9_000_000_000_000_000:
		return min(px, (x-8_000_000_000_000_000)/1000)
	}
	return px
}

// TestFastPathGCRAFromTIME: limits not of whole milliseconds, each call
// from a state read on TIME's clock (none, a TAT since the Unix epoch as
// earlier releases wrote it, or something corrupt), the same for both of
// the new script's paths, on miniredis and on a redis-server: the same
// replies, values and TTLs. (A corrupt state may read as one of the
// millisecond forms, whose reply's reset is its key's PTTL: on the real
// clock the subjects' resets may differ as their TTLs may.)
func TestFastPathGCRAFromTIME(t *testing.T) {
	subs := pathSubjects(t, "gcra", "g")[:2]
	subs[0].bound = true
	smallStates(t, subs, "g", 7, 1_764_000_000_123_456, 5000, true, func(ctx context.Context, rng *rand.Rand, srv equivalenceServer, subs []subject, now int64) (func(bool) []string, int64, string) {
		var l gcraLimit
		for l.interval%1000 == 0 {
			l = randGCRALimit(rng, false)
		}
		l.burst = min(l.burst, 1+rng.Int63n(20))
		v, wt := gcraValue(rng, now, l, true, false)
		if rng.Intn(4) == 0 {
			delAll(ctx, srv, subs)
		} else {
			setAll(ctx, srv, subs, v, pick(rng, []int64{0, 1 + rng.Int63n(100_000)}), wt)
		}
		cost := int64(1)
		peek := false
		if rng.Intn(4) == 0 {
			cost = pick(rng, []int64{0, 2, 1 + rng.Int63n(l.burst+1), l.burst, l.burst + 1})
			peek = rng.Intn(3) == 0
		}
		return gcraArgs(l, cost, peek), l.burst, fmt.Sprintf("limit %+v state %q cost %d peek %v", l, v, cost, peek)
	})
}

// TestFastPathTokenBucketSmall: small rates, periods and bursts, so that the
// rounding boundaries (d % rate, us % 1000) are hit often; each call starts
// from a bucket "<now - e>:<s>:<P>", "<d>/<i>/<B>" (on miniredis; without
// a TTL on a redis-server) or none, the same for every subject.
func TestFastPathTokenBucketSmall(t *testing.T) {
	smallStates(t, tbSubjects(t), "tb", 99, 1_764_000_000_123_456, 5000, false, func(ctx context.Context, rng *rand.Rand, srv equivalenceServer, subs []subject, now int64) (func(bool) []string, int64, string) {
		l := tbLimit{pick(rng, []int64{1, 2, 3, 7, 999, 1000, 1001, 3000}), pick(rng, []int64{1000, 2000, 3000, 7000}), 1 + rng.Int63n(5)}
		full := l.cap * l.period
		if k := rng.Intn(8); k > 2 {
			setAll(ctx, srv, subs, fmt.Sprintf("%d:%d:%d", now-rng.Int63n(5000), rng.Int63n(full+2), l.period), 0, false)
		} else if k > 0 {
			i := pick(rng, []int64{1, 2, 3, 7})
			b := 1 + rng.Int63n(5)
			px := int64(0)
			if !srv.real {
				px = 1 + rng.Int63n(i*b+2)
			}
			r := pick(rng, []int64{1, 2, l.rate})
			setAll(ctx, srv, subs, fmt.Sprintf("%d/%d/%d/%d", 1+rng.Int63n(i*b+2), r, i*r*1000, b), px, false)
		} else {
			setAll(ctx, srv, subs, "", 1, false)
			delAll(ctx, srv, subs)
		}
		cost := int64(1)
		if rng.Intn(4) == 0 {
			cost = 1 + rng.Int63n(l.cap+1)
		}
		return tbArgs(l, cost, false), l.cap, fmt.Sprintf("limit %+v cost %d", l, cost)
	})
}

// smallStates runs a script's subjects on every server, scaled(3000)
// times (until 5 mismatches), each call after moving the server's clock by
// up to step µs from start: state sets every subject's key to one state
// and returns the call's arguments, its base and a description, which
// runCompare compares on the subjects. looseReset: on a real server, the
// subjects' resets may differ as their TTLs may (replies read off a PTTL).
func smallStates(t *testing.T, subs []subject, short string, seed, start, step int64, looseReset bool, state func(ctx context.Context, rng *rand.Rand, srv equivalenceServer, subs []subject, now int64) (func(bool) []string, int64, string)) {
	ctx := context.Background()
	for _, srv := range equivalenceServers(t) {
		srv.looseReset = looseReset && srv.real
		t.Run(srv.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			now := start
			fails := 0
			for i := 0; i < scaled(3000) && fails < 5; i++ {
				now += rng.Int63n(step)
				args, base, what := state(ctx, rng, srv, subs, now)
				setClock(ctx, srv.rdb, now)
				if !runCompare(t, ctx, srv, subs, "rv:"+short+":never", args, base, fmt.Sprintf("i %d now %dus %s", i, now, what)) {
					fails++
				}
			}
		})
	}
}

// persistAll strips every subject's key of its TTL.
func persistAll(ctx context.Context, srv equivalenceServer, subs []subject) {
	_, _ = srv.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, s := range subs {
			p.Persist(ctx, s.key)
		}
		return nil
	})
}

// persistSame gives every subject's key subject ref's value (the same
// state, where a bound's differs) without a TTL, as PERSIST leaves it;
// keys that do not exist are left alone.
func persistSame(ctx context.Context, srv equivalenceServer, subs []subject, ref int) {
	v, err := srv.rdb.Get(ctx, subs[ref].key).Result()
	if err != nil {
		persistAll(ctx, srv, subs)
		return
	}
	_, _ = srv.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, s := range subs {
			p.SetXX(ctx, s.key, v, 0)
		}
		return nil
	})
}

// delAll deletes every subject's key.
func delAll(ctx context.Context, srv equivalenceServer, subs []subject) {
	for _, s := range subs {
		srv.rdb.Del(ctx, s.key)
	}
}

// TestFastPathCorruptValues: named states (leading zeros, 17 digits, '0'
// fields, a two-part bucket, a bucket of another period, 2^51 and 2^52
// token counts, a non-string) give the same reply, value and TTL on the
// new fast path, the new general path and both paths of the old scripts.
func TestFastPathCorruptValues(t *testing.T) {
	ctx := context.Background()
	const now = int64(1_764_000_000_123_456) // µs
	T := strconv.FormatInt(now-5_000, 10)
	type family struct {
		name   string
		subs   []subject
		never  string
		values []string
		// realOnly: values miniredis's INCRBY reads as integers (a sign,
		// leading zeros), which Redis refuses
		realOnly map[string]bool
		args     func(cost int64, peek bool) (func(bool) []string, int64)
	}
	gcraNew := pathSubjects(t, "gcra", "g")[:2]
	gcraNew[0].bound = true
	fams := []family{
		{"TokenBucket", tbSubjects(t), "rv:tb:never", tbCorrupt(T), nil, func(cost int64, peek bool) (func(bool) []string, int64) {
			return tbArgs(tbLimit{3, 1_000_000, 10}, cost, peek), 10
		}},
		// a limit of whole milliseconds (a token every 100 ms)
		{"TokenBucket-ms", tbSubjects(t), "rv:tb:never", tbCorrupt(T), nil, func(cost int64, peek bool) (func(bool) []string, int64) {
			return tbArgs(tbLimit{10, 1_000_000, 10}, cost, peek), 10
		}},
		{"SlidingWindow", swSubjects(t), "rv:sw:never", []string{
			"0", "00", "3", "03", "1342177281", "01342177281", "1342177281 ", " 1342177281", "+3", "67108863", "67108864",
			"134217727", "134217728", "9007199120523265", "9007199254740991", "9007199254740992", "12345678901234567",
			"-1", "1.5", "1e3", "0x10", "", "x", "1:2:3", "<list>",
		}, map[string]bool{"00": true, "03": true, "01342177281": true, "+3": true}, func(cost int64, peek bool) (func(bool) []string, int64) {
			return swArgs(swLimit{10, 1000}, cost, peek), 10
		}},
		// a limit not of whole milliseconds: the new script's two paths
		// (the script before held it in another form)
		{"GCRA", gcraNew, "rv:g:never", []string{
			T, "0" + T, "1" + T, "0", "00", "9000000000000000", "9000000000000123", "8999999999999999",
			"8000000000000000", "8000000000005999", "7999999999999999",
			"9007199254740993", "99999999999999999", "-1", "1.5", "", "x", "<list>",
		}, nil, func(cost int64, peek bool) (func(bool) []string, int64) {
			return gcraArgs(gcraLimit{1002, 10}, cost, peek), 10
		}},
		// a limit of whole milliseconds, beside the script before
		{"GCRA-ms", pathSubjects(t, "gcra", "g"), "rv:g:never", []string{
			T, "0" + T, "1" + T, "0", "00", "9000000000000000", "9000000000000123", "8999999999999999",
			"9007199254740993", "99999999999999999", "-1", "1.5", "", "x", "<list>",
		}, nil, func(cost int64, peek bool) (func(bool) []string, int64) {
			return gcraArgs(gcraLimit{1000, 10}, cost, peek), 10
		}},
	}
	for _, srv := range equivalenceServers(t) {
		// a state planted with a TTL may be read off its PTTL on the
		// real clock (GCRA's and SlidingWindow's reset and wait)
		srv.looseReset = srv.real
		for _, f := range fams {
			for _, v := range f.values {
				if f.realOnly[v] && !srv.real {
					continue
				}
				for _, c := range []struct {
					cost int64
					peek bool
				}{{1, false}, {2, false}, {1, true}} {
					for _, px := range []int64{0, 5000} {
						if px > 0 && srv.real && strings.HasPrefix(f.name, "TokenBucket") && strings.Contains(v, "/") {
							// (read off its PTTL: on the real clock the
							// subjects would read it a moment apart)
							continue
						}
						setAll(ctx, srv, f.subs, v, px, v == "<list>")
						setClock(ctx, srv.rdb, now)
						args, base := f.args(c.cost, c.peek)
						runCompare(t, ctx, srv, f.subs, f.never, args, base, fmt.Sprintf("%s value %q px %d cost %d peek %v", f.name, v, px, c.cost, c.peek))
					}
				}
			}
		}
	}
}

// tbCorrupt: named bucket states, with 5 tokens of 1000000 units (enough
// to admit) and with 5000 units (too few), refill time T; and in the
// millisecond form, of the limit of 10/s with a capacity of 10 or of
// another scale (the same interval in other terms too), missing 500 ms
// (enough) or 999 ms (too many), or not a bucket.
func tbCorrupt(T string) []string {
	var out []string
	for _, D := range []string{"500", "999"} {
		out = append(out,
			D+"/10/1000000/10", D+"/10/1000000/11", D+"/10/1000000/9", D+"/20/2000000/10", D+"/600/60000000/10",
			D+"/20/1000000/10", D+"/3/999000/10", D+"/1/1000/1", D+"/1/2678400000000/10", D+"/10/1000000/2251799813685248",
			"0/10/1000000/10", D+"/0/1000000/10", D+"/10/0/10", D+"/10/1000000/0", "0"+D+"/10/1000000/10", D+"/010/1000000/10",
			D+"/10/01000000/10", D+"/10/1000000/010", D+"/10/1000000", D+"/10/1000000/10/1", D+"/100/10", D+"/3/1000000/10",
			D+"/1/2678400001000/10", D+"/10/1000000/2251799813685249", D+"/10/1000000/10 ", " "+D+"/10/1000000/10",
			"-"+D+"/10/1000000/10", D+"/10/1000000/1e1", D+"/10/1e6/10", strings.Repeat("9", 50)+"/10/1000000/10",
			strings.Repeat("9", 70)+"/10/1000000/10", D+"/10/1000000/"+strings.Repeat("1", 17), D+"/"+strings.Repeat("1", 17)+"/1000000/10")
	}
	return append(out, tbOldForms(T)...)
}

// tbOldForms: the buckets "<t>:<s>:<P>" of tbCorrupt.
func tbOldForms(T string) []string {
	var out []string
	for _, S := range []string{"5000000", "5000"} {
		out = append(out,
			T+":"+S+":1000000", "0"+T+":"+S+":1000000", T+":0"+S+":1000000", T+":"+S+":01000000",
			"1"+T+":"+S+":1000000", T+":12345678901234567:1000000", "0:0:1000000", "0:"+S+":1000000",
			T+":0:1000000", T+":"+S+":0", "0:0", T+":"+S, T+":0", "0:"+S, T+":"+S+":2000000",
			T+":"+S+":1000", T+":"+S+":2678400000000", T+":"+S+":2678400000001", T+":2251799813685248:1000000",
			T+":2251799813685249:1000000", T+":4503599627370496:1000000", "9999999999999999:"+S+":1000000",
			"1:"+S+":1000000", T+":"+S+":1000000:1", "", "x", " "+T+":"+S+":1000000", T+":"+S+":1e6",
			T+":"+S+":1000000 ", T+":00:1000000", "00:"+S+":1000000", "<list>")
	}
	return out
}

// TestFastPathTokenBucketRounding: states crafted so that the admitted
// bucket lacks d = full - s units with d % rate in {0, 1, rate - 1} and
// ceil(d / rate) microseconds at or next to a millisecond boundary (the
// fast path's % rounding against math.ceil/floor), for small and large
// buckets (up to 2^51 units, periods up to 31 days, rates up to 2^50).
func TestFastPathTokenBucketRounding(t *testing.T) {
	ctx := context.Background()
	subs := tbSubjects(t)
	const now = int64(1_764_000_000_123_456)
	type lim struct{ period, cap int64 }
	for _, srv := range equivalenceServers(t) {
		t.Run(srv.name, func(t *testing.T) {
			fails, runs := 0, 0
			for _, L := range []lim{{1_000_000, 10}, {1000, 7}, {31 * day, 840}, {1_048_576_000, 2_147_483}, {day, 26_062}} {
				full := L.cap * L.period
				for _, r := range []int64{1, 2, 3, 7, 999, 1000, 1001, 123_457, 1 << 30, 1<<50 - 1, 1 << 50} {
					// d in [period, full] so that b = full - d + period fits
					for _, usT := range []int64{1000, 2000, 1_000_000, 123_000, full / r / 2, full / r} {
						base := usT - usT%1000
						for _, us := range []int64{base - 1, base, base + 1, base + 2, base + 999} {
							for _, q := range []int64{0, 1, r - 1} {
								var d int64
								if q == 0 {
									d = us * r
								} else {
									d = (us-1)*r + q
								}
								if us < 1 || q >= r && q > 0 || d < L.period || d > full || d <= 0 {
									continue
								}
								b := full - d + L.period
								v := fmt.Sprintf("%d:%d:%d", now, b, L.period)
								setAll(ctx, srv, subs, v, 0, false)
								setClock(ctx, srv.rdb, now)
								l := tbLimit{r, L.period, L.cap}
								runs++
								if !runCompare(t, ctx, srv, subs, "rv:tb:never", tbArgs(l, 1, false), L.cap, fmt.Sprintf("state %q limit %+v (d %d, us %d)", v, l, d, us)) {
									if fails++; fails >= 5 {
										return
									}
								}
								// the same bucket on the millisecond clock (on
								// miniredis: a PTTL read on a real clock moves
								// between the subjects), with the TTL it was
								// written with and one a millisecond longer
								u := 1000 * r
								px := (full - b + u - 1) / u
								if srv.mini == nil || px < 1 {
									continue
								}
								v = fmt.Sprintf("%d:%d:%d", 9_000_000_000_000_000+px, b, L.period)
								for _, ttl := range []int64{px, px + 1} {
									setAll(ctx, srv, subs, v, ttl, false)
									runs++
									if !runCompare(t, ctx, srv, subs, "rv:tb:never", tbArgs(l, 1, false), L.cap, fmt.Sprintf("state %q PTTL %d limit %+v", v, ttl, l)) {
										if fails++; fails >= 5 {
											return
										}
									}
								}
							}
						}
					}
				}
			}
			t.Logf("%d crafted states", runs)
		})
	}
}

// ---------------------------------------------------------------- sliding log

// TestFastPathSlidingLog: the sliding log's script (no TYPE
// call, its ZCOUNT refusing another type; 16-digit scores formatted as
// integers) against the script before that change, one limit and two
// (the second never binding), on identical logs and clock: the same
// replies, the same members and scores, the same TTLs.
func TestFastPathSlidingLog(t *testing.T) {
	ctx := context.Background()
	subs := pathSubjects(t, "sliding_log", "sl")
	const never = "rv:sl:never"
	for _, srv := range equivalenceServers(t) {
		// a denial's reset is read from its newest unit's score, on the
		// script's clock: compared exactly on a redis-server too
		t.Run(srv.name, func(t *testing.T) {
			fails := 0
			for seed := int64(1); seed <= scaled(int64(30)) && fails < 5; seed++ {
				rng := rand.New(rand.NewSource(seed))
				now := int64(1_764_000_000_000_000) + rng.Int63n(1_000_000_000_000)
				for _, s := range subs {
					srv.rdb.Del(ctx, s.key)
				}
				rate, window := 1+rng.Int63n(8), pick(rng, []int64{1, 7, 1000, 60_000})
				for step := 0; step < 200 && fails < 5; step++ {
					switch op := rng.Intn(20); {
					case op < 4:
						if rng.Intn(2) == 0 {
							// a window exactly, or a µs either side: a unit
							// leaves the window one window after it came
							now += window*1000 - 1 + rng.Int63n(3)
						} else {
							now += pick(rng, []int64{0, 1, 999, rng.Int63n(1000), rng.Int63n(window*1000 + 1), rng.Int63n(window * 3000)})
						}
					case op == 4:
						rate, window = 1+rng.Int63n(8), pick(rng, []int64{1, 7, 1000, 60_000})
					case op == 5:
						// a key of another type, with or without a TTL
						setAll(ctx, srv, subs, "x", pick(rng, []int64{0, 3_600_000}), false)
					case op == 6:
						persistAll(ctx, srv, subs)
					default:
						cost := int64(1)
						peek := "0"
						if op >= 15 {
							cost = pick(rng, []int64{0, 2, rate, rate + 1})
							if op == 19 {
								peek = "1"
							}
						}
						setClock(ctx, srv.rdb, now)
						nonce := strconv.Itoa(step)
						args := func(two bool) []string {
							a := []string{strconv.FormatInt(cost, 10), peek, nonce, strconv.FormatInt(rate, 10), strconv.FormatInt(window, 10)}
							if two {
								a = append(a, "1000000", "1")
							}
							return a
						}
						what := fmt.Sprintf("seed %d step %d now %dus rate %d window %d ms cost %d peek %s", seed, step, now, rate, window, cost, peek)
						ok := runCompare(t, ctx, srv, subs, never, args, rate, what)
						var logs []string
						for _, s := range subs {
							m, err := srv.rdb.ZRangeWithScores(ctx, s.key, 0, -1).Result()
							if err != nil {
								logs = append(logs, normErr(err))
								continue
							}
							logs = append(logs, fmt.Sprint(m))
						}
						for i := 1; i < len(logs); i++ {
							if logs[i] != logs[0] {
								ok = false
								t.Errorf("%s: %s: logs differ:\n  %s: %s\n  %s: %s", srv.name, what, subs[0].name, logs[0], subs[i].name, logs[i])
								break
							}
						}
						if !ok {
							fails++
							_, _ = srv.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
								for _, s := range subs {
									p.Del(ctx, s.key)
								}
								return nil
							})
						}
					}
				}
			}
		})
	}
}
