package rules_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/rules"
)

const goodYAML = `
default: [{name: qps, rate: 2, period: 1s}]
fail_mode: closed
subjects:
  app-1-order.create:
    - {name: qps, rate: 10, period: 1s}
    - {name: qpd, rate: 1000, period: 1d}
  app-2-order.query:
    - {rate: 5, period: 500ms}
`

const goodJSON = `{
  "default": [{"name": "qps", "rate": 2, "period": "1s"}],
  "fail_mode": "closed",
  "subjects": {
    "app-1-order.create": [{"name": "qps", "rate": 10, "period": "1s"}, {"name": "qpd", "rate": 1000, "period": "1d"}],
    "app-2-order.query": [{"rate": 5, "period": "500ms"}]
  }
}`

func wantGood(t *testing.T, s *rules.Set) {
	t.Helper()
	closed := limiter.FailClosed
	want := &rules.Set{
		Subjects: map[string][]limiter.Limit{
			"app-1-order.create": {limiter.PerSecond(10).Named("qps"), limiter.PerDay(1000).Named("qpd")},
			"app-2-order.query":  {limiter.Per(5, 500*time.Millisecond)},
		},
		Default:  rules.LimitUnknown(limiter.PerSecond(2).Named("qps")),
		FailMode: &closed,
	}
	if len(s.Subjects) != 2 || s.FailMode == nil || *s.FailMode != *want.FailMode || s.Default.Action != rules.Limit ||
		len(s.Default.Limits) != 1 || s.Default.Limits[0] != want.Default.Limits[0] {
		t.Fatalf("parsed %+v, want %+v", s, want)
	}
	for k, v := range want.Subjects {
		got := s.Subjects[k]
		if len(got) != len(v) {
			t.Fatalf("%s: %v, want %v", k, got, v)
		}
		for i := range v {
			if got[i] != v[i] {
				t.Errorf("%s[%d] = %v, want %v", k, i, got[i], v[i])
			}
		}
	}
}

func TestParseGood(t *testing.T) {
	s, err := rules.ParseYAML([]byte(goodYAML))
	if err != nil {
		t.Fatal(err)
	}
	wantGood(t, s)
	s, err = rules.ParseJSON([]byte(goodJSON))
	if err != nil {
		t.Fatal(err)
	}
	wantGood(t, s)
	for src, want := range map[string]rules.Action{`{"default":"allow","subjects":{}}`: rules.Allow, `{"default":"deny"}`: rules.Deny, `{}`: rules.Deny} {
		s, err := rules.ParseJSON([]byte(src))
		if err != nil || s.Default.Action != want || s.FailMode != nil {
			t.Errorf("%s: %+v, %v; want default %s", src, s, err, want)
		}
	}
}

// TestParseErrors: every invalid config is a *ConfigError naming the field.
func TestParseErrors(t *testing.T) {
	rule := func(body string) string { return `{"subjects":{"a":[` + body + `]}}` }
	many := strings.Repeat(`{"rate":1,"period":"1s"},`, limiter.MaxLimits)
	cases := []struct {
		name, json, field, says string
		limit                   bool // wraps limiter.ErrInvalidLimit
	}{
		{"zero rate", rule(`{"name":"q","rate":0,"period":"1s"}`), `subjects["a"][0].rate`, "positive", true},
		{"negative rate", rule(`{"rate":-3,"period":"1s"}`), `subjects["a"][0].rate`, "positive", true},
		{"fractional rate", rule(`{"rate":1.5,"period":"1s"}`), `subjects["a"][0].rate`, "whole number", false},
		{"string rate", rule(`{"rate":"10","period":"1s"}`), `subjects["a"][0].rate`, "whole number", false},
		{"huge rate", rule(`{"rate":99999999999999999999,"period":"1s"}`), `subjects["a"][0].rate`, "whole number", false},
		{"rate above MaxRate", rule(`{"rate":2251799813685248,"period":"1s"}`), `subjects["a"][0].rate`, "above", true},
		{"negative burst", rule(`{"rate":1,"period":"1s","burst":-1}`), `subjects["a"][0].burst`, "burst", true},
		{"bad period", rule(`{"rate":1,"period":"1x"}`), `subjects["a"][0].period`, "duration", false},
		{"numeric period", rule(`{"rate":1,"period":60}`), `subjects["a"][0].period`, "duration string", false},
		{"zero period", rule(`{"rate":1,"period":"0s"}`), `subjects["a"][0].period`, "shorter", true},
		{"sub-ms period", rule(`{"rate":1,"period":"1500us"}`), `subjects["a"][0].period`, "milliseconds", true},
		{"too long period", rule(`{"rate":1,"period":"32d"}`), `subjects["a"][0].period`, "whole days", false},
		{"too long period in hours", rule(`{"rate":1,"period":"745h"}`), `subjects["a"][0].period`, "longer", true},
		{"missing period", rule(`{"rate":1}`), `subjects["a"][0].period`, "missing", false},
		{"missing rate", rule(`{"period":"1s"}`), `subjects["a"][0].rate`, "missing", false},
		{"unknown rule field", rule(`{"rate":1,"period":"1s","rat":2}`), `subjects["a"][0].rat`, "unknown field", false},
		{"name not a string", rule(`{"name":5,"rate":1,"period":"1s"}`), `subjects["a"][0].name`, "string", false},
		{"name with a quote", rule(`{"name":"q\"s","rate":1,"period":"1s"}`), `subjects["a"][0].name`, "visible ASCII", true},
		{"name too long", rule(`{"name":"` + strings.Repeat("n", limiter.MaxNameLen+1) + `","rate":1,"period":"1s"}`), `subjects["a"][0].name`, "longer", true},
		{"rule not an object", rule(`5`), `subjects["a"][0]`, "object", false},
		{"duplicate names", rule(`{"name":"q","rate":1,"period":"1s"},{"name":"q","rate":5,"period":"1m"}`), `subjects["a"][1]`, "same counter", true},
		{"duplicate unnamed periods", rule(`{"rate":1,"period":"1s"},{"rate":5,"period":"1000ms"}`), `subjects["a"][1]`, "same counter", true},
		{"no rules", rule(``), `subjects["a"]`, "no rules", false},
		{"too many rules", rule(many + `{"rate":1,"period":"2s"}`), `subjects["a"]`, "at most", true},
		{"rules not a list", `{"subjects":{"a":{"rate":1}}}`, `subjects["a"]`, "list of rules", false},
		{"subjects not an object", `{"subjects":[]}`, `subjects`, "object", false},
		{"empty subject", `{"subjects":{"":[{"rate":1,"period":"1s"}]}}`, `subjects[""]`, "empty subject", false},
		{"bad default", `{"default":"maybe"}`, `default`, "deny", false},
		{"bad default rule", `{"default":[{"rate":0,"period":"1s"}]}`, `default[0].rate`, "positive", true},
		{"empty default list", `{"default":[]}`, `default`, "no rules", false},
		{"bad fail mode", `{"fail_mode":"sometimes"}`, `fail_mode`, "closed", false},
		{"unknown top field", `{"subject":{}}`, `subject`, "unknown field", false},
		{"not an object", `[1]`, ``, "object", false},
		{"syntax", `{"subjects":`, ``, "EOF", false},
		{"trailing data", `{} {}`, ``, "after", false},
		{"subject twice", `{"subjects":{"a":[{"rate":1,"period":"1s"}],"b":[{"rate":2,"period":"1s"}],"a":[{"rate":9,"period":"1s"}]}}`, ``, `"a" appears twice`, false},
		{"field twice", rule(`{"rate":100,"period":"1s","rate":1}`), ``, `"rate" appears twice`, false},
		{"subjects twice", `{"subjects":{"a":[{"rate":1,"period":"1s"}]},"default":"deny","subjects":{}}`, ``, `"subjects" appears twice`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := rules.ParseJSON([]byte(c.json))
			var ce *rules.ConfigError
			if !errors.Is(err, rules.ErrInvalidConfig) || !errors.As(err, &ce) {
				t.Fatalf("err = %v; want a *ConfigError", err)
			}
			if ce.Field != c.field || !strings.Contains(err.Error(), c.says) {
				t.Errorf("err = %v (field %q); want field %q, saying %q", err, ce.Field, c.field, c.says)
			}
			if errors.Is(err, limiter.ErrInvalidLimit) != c.limit {
				t.Errorf("errors.Is(err, limiter.ErrInvalidLimit) = %v, want %v", !c.limit, c.limit)
			}
		})
	}
	// YAML reports the same fields.
	_, err := rules.ParseYAML([]byte("subjects:\n  a:\n    - {rate: 1, period: 1x}\n"))
	var ce *rules.ConfigError
	if !errors.As(err, &ce) || ce.Field != `subjects["a"][0].period` {
		t.Errorf("YAML: %v", err)
	}
	if _, err := rules.ParseYAML([]byte("subjects: [\n")); !errors.Is(err, rules.ErrInvalidConfig) {
		t.Errorf("YAML syntax error: %v", err)
	}
}

// TestValidateGoLiteral: a Set written in Go is checked the same way, with
// the same field names.
func TestValidateGoLiteral(t *testing.T) {
	cases := []struct {
		set   rules.Set
		field string
	}{
		{rules.Set{Subjects: map[string][]limiter.Limit{"a": {limiter.PerSecond(0)}}}, `subjects["a"][0].rate`},
		{rules.Set{Subjects: map[string][]limiter.Limit{"a": {limiter.PerSecond(1), limiter.PerSecond(2)}}}, `subjects["a"][1]`},
		{rules.Set{Default: rules.Default{Action: rules.Allow, Limits: []limiter.Limit{limiter.PerSecond(1)}}}, `default`},
		{rules.Set{Default: rules.Default{Action: 9}}, `default`},
		{rules.Set{Default: rules.LimitUnknown()}, `default`},
		{rules.Set{FailMode: failMode(limiter.FailMode(7))}, `fail_mode`},
	}
	for _, c := range cases {
		err := c.set.Validate()
		var ce *rules.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%+v: %v; want field %s", c.set, err, c.field)
		}
		m := redistest.NewMini(t)
		b := newBackend(t, m.Addr(), m)
		if _, err := rules.New(context.Background(), newLimiter(t, b.st), rules.Static(&c.set)); !errors.Is(err, rules.ErrInvalidConfig) {
			t.Errorf("New with an invalid static set: %v", err)
		}
	}
	if err := (&rules.Set{}).Validate(); err != nil {
		t.Errorf("the zero Set (deny everything) is valid: %v", err)
	}
}

func TestPeriodsAndRoundTrip(t *testing.T) {
	for s, want := range map[string]time.Duration{"1s": time.Second, "500ms": 500 * time.Millisecond, "1d": 24 * time.Hour, "31d": limiter.MaxPeriod, "1h30m": 90 * time.Minute} {
		if d, err := rules.ParsePeriod(s); err != nil || d != want {
			t.Errorf("ParsePeriod(%q) = %s, %v", s, d, err)
		}
	}
	for _, s := range []string{"", "d", "0d", "-1d", "1.5d", "32d", "soon"} {
		if _, err := rules.ParsePeriod(s); err == nil {
			t.Errorf("ParsePeriod(%q) accepted", s)
		}
	}
	ls := []limiter.Limit{limiter.PerSecond(10).Named("qps"), limiter.PerDay(1000).Named("qpd"), limiter.Per(3, 1500*time.Millisecond), {Rate: 5, Period: time.Minute, Burst: 2, Name: "b"}}
	v, err := rules.FormatRules(ls)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"name":"qps","rate":10,"period":"1s"},{"name":"qpd","rate":1000,"period":"1d"},{"rate":3,"period":"1.5s"},{"name":"b","rate":5,"period":"1m","burst":2}]`; string(v) != want {
		t.Errorf("FormatRules = %s\nwant %s", v, want)
	}
	back, err := rules.ParseRules(v)
	if err != nil || len(back) != len(ls) {
		t.Fatalf("ParseRules: %v, %v", back, err)
	}
	for i := range ls {
		if back[i] != ls[i] {
			t.Errorf("round trip %d: %v, want %v", i, back[i], ls[i])
		}
	}
	if got := rules.RuleName(limiter.PerDay(1)); got != "per-1d" {
		t.Errorf("RuleName of an unnamed daily rule = %q", got)
	}
}

// writeFile replaces path atomically, as File asks.
func writeFile(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestFileSource: JSON and YAML files load, an edit reloads without
// touching counters, and a bad edit keeps the last good rules.
func TestFileSource(t *testing.T) {
	for _, c := range []struct{ name, data string }{{"rules.yaml", goodYAML}, {"rules.json", goodJSON}} {
		t.Run(c.name, func(t *testing.T) {
			m := redistest.NewMini(t)
			b := newBackend(t, m.Addr(), m)
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), c.name)
			writeFile(t, path, c.data)
			rl, err := rules.New(ctx, newLimiter(t, b.st), rules.File(path))
			if err != nil {
				t.Fatal(err)
			}
			wantGood(t, rl.Set())
			for i := 0; i < 3; i++ {
				if d, err := rl.Allow(ctx, "app-1-order.create"); err != nil || !d.Allowed {
					t.Fatalf("%+v, %v", d, err)
				}
			}
			if changed, err := rl.Reload(ctx); changed || err != nil {
				t.Errorf("reload of an unchanged file: changed=%v, %v", changed, err)
			}
			writeFile(t, path, strings.Replace(c.data, "1000", "1001", 1))
			if changed, err := rl.Reload(ctx); !changed || err != nil {
				t.Fatalf("reload of an edited file: changed=%v, %v", changed, err)
			}
			if got, _ := rl.Rules("app-1-order.create"); got[1].Rate != 1001 {
				t.Errorf("rules after the edit: %v", got)
			}
			d, err := rl.Allow(ctx, "app-1-order.create")
			if err != nil || d.Remaining != 6 {
				t.Errorf("after the edit: %+v, %v; want qps at 4 of 10 (not reset)", d, err)
			}
			if n := b.counter(t, "app-1-order.create", limiter.PerDay(1000).Named("qpd")); n != 4 {
				t.Errorf("qpd counter %d, want 4", n)
			}
			writeFile(t, path, strings.Replace(c.data, "period", "perio", 1))
			_, err = rl.Reload(ctx)
			var ce *rules.ConfigError
			if !errors.As(err, &ce) || !strings.HasPrefix(ce.Source, "file ") || !strings.Contains(ce.Field, "perio") {
				t.Errorf("bad edit: %v", err)
			}
			if got, _ := rl.Rules("app-1-order.create"); len(got) != 2 || got[1].Rate != 1001 {
				t.Errorf("rules after a bad edit: %v; want the last good", got)
			}
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if _, err := rl.Reload(ctx); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("missing file: %v", err)
			}
		})
	}
}

// TestDefaults: deny and allow decide unknown subjects without Redis;
// default limits give each unknown subject counters of its own.
func TestDefaults(t *testing.T) {
	m := redistest.NewMini(t)
	b := newBackend(t, m.Addr(), m)
	ctx := context.Background()
	lim := newLimiter(t, b.st)
	own := map[string][]limiter.Limit{"known": {limiter.PerMinute(1).Named("qpm")}}
	for _, c := range []struct {
		def     rules.Default
		allowed bool
	}{{rules.DenyUnknown(), false}, {rules.AllowUnknown(), true}} {
		rl, err := rules.New(ctx, lim, rules.Static(&rules.Set{Subjects: own, Default: c.def}))
		if err != nil {
			t.Fatal(err)
		}
		before := m.CommandCount()
		for i := 0; i < 3; i++ {
			d, err := rl.Allow(ctx, "stranger")
			if err != nil || d.Allowed != c.allowed || !d.Default || len(d.Rules) != 0 || d.Degraded {
				t.Errorf("%s: %+v, %v", c.def.Action, d, err)
			}
			if !c.allowed && d.RetryAfter != -1 {
				t.Errorf("deny: RetryAfter %s, want -1 (never)", d.RetryAfter)
			}
		}
		if n := m.CommandCount() - before; n != 0 {
			t.Errorf("%s: %d Redis commands for unknown subjects", c.def.Action, n)
		}
		if _, err := rl.Allow(ctx, ""); !errors.Is(err, limiter.ErrInvalidKey) {
			t.Errorf("%s: empty subject: %v", c.def.Action, err)
		}
		if _, err := rl.AllowN(ctx, "stranger", -1); !errors.Is(err, limiter.ErrInvalidCost) {
			t.Errorf("%s: negative cost: %v", c.def.Action, err)
		}
	}
	def := limiter.PerMinute(2).Named("default")
	rl, err := rules.New(ctx, lim, rules.Static(&rules.Set{Subjects: own, Default: rules.LimitUnknown(def)}))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"u1", "u2"} {
		for i := 0; i < 3; i++ {
			d, err := rl.Allow(ctx, s)
			if err != nil || d.Allowed != (i < 2) || !d.Default || len(d.Rules) != 1 || d.Limit.Name != "default" {
				t.Errorf("%s call %d: %+v, %v", s, i, d, err)
			}
		}
	}
	if d, err := rl.Peek(ctx, "known"); err != nil || !d.Allowed || d.Default || d.Remaining != 1 {
		t.Errorf("Peek of a known subject: %+v, %v", d, err)
	}
	if d, err := rl.AllowN(ctx, "known", 2); err != nil || d.Allowed || d.RetryAfter != -1 {
		t.Errorf("AllowN above the limit: %+v, %v", d, err)
	}
}

// counting is a limiter.Observer that counts.
type counting struct {
	mu                          sync.Mutex
	decisions, degraded, errors int
}

func (c *counting) OnDecision(_ context.Context, _ string, r limiter.Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.decisions++
	if r.Degraded {
		c.degraded++
	}
}

func (c *counting) OnError(context.Context, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errors++
}

// TestSetFailMode: a set's FailMode overrides the limiter's, with Redis
// down; the limiter's observer hears of each call exactly once.
func TestSetFailMode(t *testing.T) {
	for _, c := range []struct {
		limMode limiter.FailMode
		setMode *limiter.FailMode
		want    string // error, open, closed
	}{
		{limiter.FailError, nil, "error"},
		{limiter.FailError, failMode(limiter.FailOpen), "open"},
		{limiter.FailError, failMode(limiter.FailClosed), "closed"},
		{limiter.FailOpen, failMode(limiter.FailError), "error"},
		{limiter.FailClosed, nil, "closed"},
	} {
		m := redistest.NewMini(t)
		b := newBackend(t, m.Addr(), m)
		ctx := context.Background()
		var obs counting
		lim := newLimiter(t, b.st, limiter.WithFailMode(c.limMode), limiter.WithObserver(&obs), limiter.WithTimeout(time.Second))
		set := &rules.Set{Subjects: map[string][]limiter.Limit{"s": {qps, qpd}}, FailMode: c.setMode}
		rl, err := rules.New(ctx, lim, rules.Static(set))
		if err != nil {
			t.Fatal(err)
		}
		if d, err := rl.Allow(ctx, "s"); err != nil || !d.Allowed || d.Degraded {
			t.Fatalf("Redis up: %+v, %v", d, err)
		}
		m.Close()
		const calls = 4
		for i := 0; i < calls; i++ {
			d, err := rl.Allow(ctx, "s")
			got := "error"
			if err == nil {
				got = "closed"
				if d.Allowed {
					got = "open"
				}
				if !d.Degraded || d.Cause == nil {
					t.Errorf("%s: a decision with Redis down is not Degraded: %+v", c.want, d)
				}
			}
			if got != c.want {
				t.Errorf("limiter %s, set %v: call %d behaved as %s (%+v, %v), want %s", c.limMode, c.setMode, i, got, d, err, c.want)
			}
		}
		wantDecisions, wantDegraded := 1+calls, calls
		if c.want == "error" {
			wantDecisions, wantDegraded = 1, 0
		}
		if obs.decisions != wantDecisions || obs.degraded != wantDegraded || obs.errors != calls {
			t.Errorf("%s: observer told %d decisions (%d degraded), %d errors; want %d (%d), %d", c.want, obs.decisions, obs.degraded, obs.errors, wantDecisions, wantDegraded, calls)
		}
	}
}

func TestFormatPeriod(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Second: "1s", 10 * time.Second: "10s", time.Minute: "1m", 90 * time.Second: "1m30s", time.Hour: "1h",
		90 * time.Minute: "1h30m", time.Hour + time.Second: "1h0m1s", 500 * time.Millisecond: "500ms", 48 * time.Hour: "2d", 25 * time.Hour: "25h",
	} {
		got := rules.FormatPeriod(d)
		if got != want {
			t.Errorf("FormatPeriod(%s) = %q, want %q", d, got, want)
		}
		if back, err := rules.ParsePeriod(got); err != nil || back != d {
			t.Errorf("ParsePeriod(%q) = %s, %v", got, back, err)
		}
	}
}

// failMode returns a pointer to a copy of m.
func failMode(m limiter.FailMode) *limiter.FailMode { return &m }
