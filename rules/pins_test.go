package rules_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/strategy"
)

func fieldOf(err error) string {
	var ce *rules.ConfigError
	if errors.As(err, &ce) {
		return ce.Field
	}
	return "<not a ConfigError>"
}

// ParseRules: "It checks each rule".
func TestParseRulesChecksEachRule(t *testing.T) {
	for _, in := range []string{`[{"rate":0,"period":"1s"}]`, `[{"rate":1,"period":"0s"}]`, `[{"rate":1,"period":"1s","name":"a b"}]`} {
		if ls, err := rules.ParseRules([]byte(in)); !errors.Is(err, rules.ErrInvalidConfig) {
			t.Errorf("ParseRules(%s) = %v, %v; want a *ConfigError", in, ls, err)
		}
	}
}

// A YAML subject key that is not a string is refused, not dropped.
func TestYAMLNonStringSubjectKeyRefused(t *testing.T) {
	s, err := rules.ParseYAML([]byte("subjects:\n  123:\n    - {name: qps, rate: 1, period: 1s}\n  app:\n    - {name: qps, rate: 1, period: 1s}\n"))
	if err == nil {
		t.Fatalf("accepted, subjects %v", s.Subjects)
	}
}

// "burst: 00" is burst 0 (decimal), as in JSON's reading.
func TestYAMLBurstDoubleZero(t *testing.T) {
	s, err := rules.ParseYAML([]byte("subjects:\n  app:\n    - {name: qps, rate: 1, period: 1s, burst: 00}\n"))
	if err != nil || s.Subjects["app"][0].Burst != 0 {
		t.Fatalf("%v, %v", s, err)
	}
}

func TestValidateFailModeRange(t *testing.T) {
	for _, m := range []limiter.FailMode{-1, limiter.FailClosed + 1} {
		s := rules.Set{FailMode: &m}
		if err := s.Validate(); fieldOf(err) != "fail_mode" {
			t.Errorf("FailMode %d: %v; want a *ConfigError on fail_mode", int(m), err)
		}
	}
}

// ValidateFor checks the Default's limits against the strategy too (an
// unknown subject's every call would fail otherwise).
func TestValidateForDefaultStrategyBounds(t *testing.T) {
	m := redistest.NewMini(t)
	b := newBackend(t, m.Addr(), m)
	lim, err := limiter.New(b.st, strategy.NewSlidingLog(), limiter.WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	s := rules.Set{Default: rules.LimitUnknown(limiter.PerDay(20_000).Named("qpd"))}
	if err := s.ValidateFor(lim); !errors.Is(err, limiter.ErrInvalidLimit) || fieldOf(err) != "default[0]" {
		t.Fatalf("ValidateFor = %v; want ErrInvalidLimit at default[0]", err)
	}
	if err := s.ValidateFor(nil); !errors.Is(err, limiter.ErrInvalidOption) {
		t.Fatalf("ValidateFor(nil) = %v; want ErrInvalidOption", err)
	}
}

func TestBurstFieldNamed(t *testing.T) {
	s := rules.Set{Subjects: map[string][]limiter.Limit{"a": {{Rate: 1, Period: time.Second, Burst: limiter.MaxRate + 1, Name: "b"}}}}
	if err := s.Validate(); fieldOf(err) != `subjects["a"][0].burst` {
		t.Fatalf("%v (field %q)", err, fieldOf(err))
	}
}

// Set.Validate: "rule names are visible ASCII without quotes or backslashes".
func TestRuleNameCharacters(t *testing.T) {
	for _, name := range []string{"a b", "a\x7f", `a\b`, `a"b`} {
		s := rules.Set{Subjects: map[string][]limiter.Limit{"a": {limiter.PerSecond(1).Named(name)}}}
		if err := s.Validate(); fieldOf(err) != `subjects["a"][0].name` {
			t.Errorf("name %q: %v", name, err)
		}
	}
}

// Static: "loads a copy of s, as it is now".
func TestStaticCopies(t *testing.T) {
	fm := limiter.FailClosed
	s := &rules.Set{
		Subjects: map[string][]limiter.Limit{"a": {limiter.PerSecond(1).Named("qps")}},
		Default:  rules.LimitUnknown(limiter.PerSecond(2).Named("qps")),
		FailMode: &fm,
	}
	src := rules.Static(s)
	s.Subjects["a"][0].Rate = 99
	s.Default.Limits[0].Rate = 99
	fm = limiter.FailOpen
	got, err := src.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got.Subjects["a"][0].Rate != 1 || got.Default.Limits[0].Rate != 2 || *got.FailMode != limiter.FailClosed {
		t.Fatalf("Static's set changed with the caller's: %+v, fail mode %v", got, *got.FailMode)
	}
}

// Every kind of change to a set is applied by Reload.
func TestReloadAppliesEveryChange(t *testing.T) {
	m := redistest.NewMini(t)
	b := newBackend(t, m.Addr(), m)
	ctx := context.Background()
	fm := func(m limiter.FailMode) *limiter.FailMode { return &m }
	q := limiter.PerSecond(1).Named("qps")
	d := limiter.PerDay(10).Named("qpd")
	steps := []*rules.Set{
		{Subjects: map[string][]limiter.Limit{"a": {q}}},
		{Subjects: map[string][]limiter.Limit{"a": {q}, "b": {q}}},                                                                      // subject added
		{Subjects: map[string][]limiter.Limit{"a": {q, d}, "b": {q}}},                                                                   // rule added
		{Subjects: map[string][]limiter.Limit{"a": {q, d}, "b": {q}}, Default: rules.AllowUnknown()},                                    // default action
		{Subjects: map[string][]limiter.Limit{"a": {q, d}, "b": {q}}, Default: rules.LimitUnknown(q)},                                   // default limits
		{Subjects: map[string][]limiter.Limit{"a": {q, d}, "b": {q}}, Default: rules.LimitUnknown(d)},                                   // default limits changed
		{Subjects: map[string][]limiter.Limit{"a": {q, d}, "b": {q}}, Default: rules.LimitUnknown(d), FailMode: fm(limiter.FailOpen)},   // fail mode set
		{Subjects: map[string][]limiter.Limit{"a": {q, d}, "b": {q}}, Default: rules.LimitUnknown(d), FailMode: fm(limiter.FailClosed)}, // fail mode changed
		{Subjects: map[string][]limiter.Limit{"a": {q, d}, "b": {q}}, Default: rules.LimitUnknown(d)},                                   // fail mode dropped
	}
	src := &swapSource{}
	src.p.Store(steps[0])
	rl, err := rules.New(ctx, newLimiter(t, b.st), src)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range steps[1:] {
		src.p.Store(s)
		changed, err := rl.Reload(ctx)
		if err != nil || !changed || rl.Set() != s {
			t.Errorf("step %d: changed=%v err=%v; the new set is not in force", i+1, changed, err)
		}
	}
}

func TestNewRefusesBadArgs(t *testing.T) {
	m := redistest.NewMini(t)
	b := newBackend(t, m.Addr(), m)
	ctx := context.Background()
	lim := newLimiter(t, b.st)
	src := rules.Static(&rules.Set{})
	if _, err := rules.New(ctx, lim, src, rules.WithInterval(0)); !errors.Is(err, limiter.ErrInvalidOption) {
		t.Errorf("WithInterval(0): %v", err)
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("nil source: panic %v", r)
			}
		}()
		if _, err := rules.New(ctx, lim, nil); !errors.Is(err, limiter.ErrInvalidOption) {
			t.Errorf("nil source: %v", err)
		}
	}()
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("nil option: panic %v", r)
			}
		}()
		if _, err := rules.New(ctx, lim, src, nil); !errors.Is(err, limiter.ErrInvalidOption) {
			t.Errorf("nil option: %v", err)
		}
	}()
}

// Peek: "whether a request of cost 1 ... would be admitted now".
func TestPeekCostOne(t *testing.T) {
	m := redistest.NewMini(t)
	b := newBackend(t, m.Addr(), m)
	ctx := context.Background()
	rl, err := rules.New(ctx, newLimiter(t, b.st), rules.Static(&rules.Set{Subjects: map[string][]limiter.Limit{"a": {limiter.PerMinute(1).Named("qpm")}}}))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := rl.Allow(ctx, "a"); err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	if d, err := rl.Peek(ctx, "a"); err != nil || d.Allowed {
		t.Fatalf("Peek with the limit used up: %+v, %v; want denied", d, err)
	}
}

type scriptedSource struct {
	i     atomic.Int64
	steps []error // nil: the good set
	set   *rules.Set
}

func (s *scriptedSource) Load(context.Context) (*rules.Set, error) {
	i := min(int(s.i.Add(1))-1, len(s.steps)-1)
	if s.steps[i] != nil {
		return nil, s.steps[i]
	}
	return s.set, nil
}

// WithReloadHook: a repeated failure is reported once "until a load
// succeeds"; the recovery is reported (nil), and the same failure after it
// again.
func TestWatchHookRecovery(t *testing.T) {
	m := redistest.NewMini(t)
	b := newBackend(t, m.Addr(), m)
	bad := errors.New("boom")
	src := &scriptedSource{steps: []error{nil, bad, nil, bad}, set: &rules.Set{}}
	var mu sync.Mutex
	var got []string
	hook := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			got = append(got, "nil")
		} else {
			got = append(got, err.Error())
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	rl, err := rules.New(ctx, newLimiter(t, b.st), src, rules.WithInterval(5*time.Millisecond), rules.WithReloadHook(hook))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { rl.Watch(ctx); close(done) }()
	// until the source has failed again a few times after its last
	// step (each a repeat the hook must not hear), or 30 s on a busy
	// machine
	for end := time.Now().Add(30 * time.Second); src.i.Load() < 8 && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, ",") != "boom,nil,boom" {
		t.Fatalf("hook calls %q after %d loads; want boom, nil, boom", got, src.i.Load())
	}
}

func TestStaticErrorNamesSource(t *testing.T) {
	_, err := rules.Static(&rules.Set{Subjects: map[string][]limiter.Limit{"a": nil}}).Load(context.Background())
	var ce *rules.ConfigError
	if !errors.As(err, &ce) || ce.Source != "static set" {
		t.Fatalf("%v", err)
	}
}

func TestRedisHashSource(t *testing.T) {
	m := redistest.NewMini(t)
	b := newBackend(t, m.Addr(), m)
	ctx := context.Background()
	if err := b.rdb.Set(ctx, "notahash", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if s, err := (rules.RedisHash{Store: b.st, Key: "notahash", AllowEmpty: true}).Load(ctx); err == nil {
		t.Errorf("a key of the wrong type loaded as %+v", s)
	}
	b.hset(t, "h", "app", rulesJSON(t, qps))
	if s, err := (rules.RedisHash{Store: b.st, Key: "h", Default: rules.LimitUnknown()}).Load(ctx); fieldOf(err) != "default" {
		t.Errorf("a Default Limit without limits: %+v, %v", s, err)
	}
	fm := limiter.FailClosed
	s, err := rules.RedisHash{Store: b.st, Key: "h", FailMode: &fm}.Load(ctx)
	if err != nil || s.FailMode == nil || *s.FailMode != limiter.FailClosed {
		t.Errorf("FailMode not carried: %+v, %v", s, err)
	}
}

// slowSource: the first Load is immediate; later ones take delay, or until
// their context ends.
type slowSource struct {
	n     atomic.Int64
	delay time.Duration
}

func (s *slowSource) Load(ctx context.Context) (*rules.Set, error) {
	if s.n.Add(1) == 1 {
		return &rules.Set{}, nil
	}
	select {
	case <-time.After(s.delay):
		return &rules.Set{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func watchHookCalls(t *testing.T, src rules.Source, interval, run time.Duration) []error {
	m := redistest.NewMini(t)
	b := newBackend(t, m.Addr(), m)
	var mu sync.Mutex
	var got []error
	ctx, cancel := context.WithCancel(context.Background())
	rl, err := rules.New(ctx, newLimiter(t, b.st), src, rules.WithInterval(interval), rules.WithReloadHook(func(err error) {
		mu.Lock()
		got = append(got, err)
		mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { rl.Watch(ctx); close(done) }()
	time.Sleep(run)
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	return got
}

// Watch: "Each load is bounded by the interval (at least one second)".
func TestWatchLoadBoundAtLeastOneSecond(t *testing.T) {
	if got := watchHookCalls(t, &slowSource{delay: 50 * time.Millisecond}, 10*time.Millisecond, 300*time.Millisecond); len(got) != 0 {
		t.Fatalf("a 50 ms load under a 10 ms interval failed: %v", got)
	}
}

// Watch ending (its ctx done) during a load reports nothing to the hook.
func TestWatchStopDuringLoadNotReported(t *testing.T) {
	if got := watchHookCalls(t, &slowSource{delay: time.Hour}, 5*time.Millisecond, 100*time.Millisecond); len(got) != 0 {
		t.Fatalf("hook told of %v while Watch was stopping", got)
	}
}

func TestRedisHashEmptyKey(t *testing.T) {
	m := redistest.NewMini(t)
	b := newBackend(t, m.Addr(), m)
	if s, err := (rules.RedisHash{Store: b.st, Key: "", AllowEmpty: true}).Load(context.Background()); !errors.Is(err, rules.ErrInvalidConfig) {
		t.Fatalf("empty Key: %+v, %v", s, err)
	}
}

// A key of the wrong type is reported with the server's refusal, not as
// an unreadable reply.
func TestRedisHashWrongTypeNamed(t *testing.T) {
	m := redistest.NewMini(t)
	b := newBackend(t, m.Addr(), m)
	ctx := context.Background()
	if err := b.rdb.Set(ctx, "notahash", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := rules.RedisHash{Store: b.st, Key: "notahash", AllowEmpty: true}.Load(ctx)
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("%v; want the WRONGTYPE refusal", err)
	}
}
