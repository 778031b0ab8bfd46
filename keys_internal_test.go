package limiter

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/quotagate/limiter/internal/derive"
	"github.com/quotagate/limiter/store"
)

// BenchmarkKeyBuild measures the keys of one decision with one limit and a
// plain subject, as Allow builds them.
func BenchmarkKeyBuild(b *testing.B) {
	kb := keyBuilder{prefix: DefaultPrefix}
	limits := []Limit{PerSecond(100)}
	var dst [2]string
	b.ReportAllocs()
	for b.Loop() {
		if _, err := kb.build("user-01-1", limits, dst[:]); err != nil {
			b.Fatal(err)
		}
	}
}

// recorder is a Strategy that keeps a copy of what it is asked to decide
// and the keys Request.AppendKey lays out, and admits.
type recorder struct {
	keys     []string // req.Keys as Decide got it
	appended []string // AppendKey(i) for every limit
}

func (r *recorder) Decide(_ context.Context, _ store.Store, req Request) (Result, error) {
	r.keys = append([]string(nil), req.Keys...)
	if req.Keys == nil {
		r.keys = nil
	}
	r.appended = r.appended[:0]
	for i := range req.Limits {
		r.appended = append(r.appended, string(req.AppendKey([]byte("junk")[:0], i)))
	}
	return Result{Allowed: true}, nil
}

// deriving is a recorder that declares it names its keys with AppendKey.
type deriving struct{ recorder }

func (d *deriving) DerivesKeys(derive.Token) any { return d }

// TestAppendKey checks that a strategy that declares derive.KeyDeriver
// gets no Keys from the Limiter and that AppendKey then lays out exactly
// the keys Key gives (and a strategy that does not declare it gets them
// built), for plain and hashed subjects, named and unnamed limits, and
// keys longer than any stack buffer on the way.
func TestAppendKey(t *testing.T) {
	long := func(c byte, n int) string { return string(bytes.Repeat([]byte{c}, n)) }
	cases := []struct {
		prefix, subject string
		limits          []Limit
		layout          []string // the keys, where written out here
	}{
		{DefaultPrefix, "user-1", []Limit{PerSecond(10)}, []string{"limiter:{user-1}:1000ms"}},
		{"p", "user 1 {with} braces", []Limit{PerSecond(10), PerMinute(100)}, nil},
		{"", "#hash-like", []Limit{PerSecond(1).Named("a"), PerSecond(2).Named("b")}, nil},
		{"q", "u", []Limit{PerSecond(1).Named("a"), PerMinute(2)}, []string{"q:{u}:n=a", "q:{u}:60000ms"}},
		{long('p', MaxPrefixLen), long('s', 128), []Limit{PerDay(5).Named(long('n', MaxNameLen))}, nil},
		{long('p', MaxPrefixLen), long('s', 129), []Limit{PerDay(5)}, nil},
	}
	for _, c := range cases {
		var want []string
		for _, l := range c.limits {
			k, err := Key(c.prefix, c.subject, l)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, k)
		}
		if c.layout != nil && !slices.Equal(want, c.layout) {
			t.Errorf("Key(%q, %q, ...) = %q, want %q: existing counters would be lost", c.prefix, c.subject, want, c.layout)
		}
		for _, s := range []interface {
			Strategy
			got() *recorder
		}{&plainRec{}, &deriving{}} {
			_, derives := s.(derive.KeyDeriver)
			lim, err := New(nopStore{}, s, WithPrefix(c.prefix))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := lim.Allow(context.Background(), c.subject, c.limits...); err != nil {
				t.Fatal(err)
			}
			r := s.got()
			switch {
			case derives && r.keys != nil:
				t.Errorf("prefix %.10q subject %.10q: a KeyDeriver got Keys %q; want nil", c.prefix, c.subject, r.keys)
			case !derives && !slices.Equal(r.keys, want):
				t.Errorf("prefix %.10q subject %.10q: Keys %q, want %q", c.prefix, c.subject, r.keys, want)
			}
			if !slices.Equal(r.appended, want) {
				t.Errorf("prefix %.10q subject %.10q, KeyDeriver %v: AppendKey gave %q, want %q", c.prefix, c.subject, derives, r.appended, want)
			}
		}
	}
}

// plainRec is a recorder that does not declare derive.KeyDeriver.
type plainRec struct{ recorder }

func (p *plainRec) got() *recorder { return &p.recorder }
func (d *deriving) got() *recorder { return &d.recorder }

// TestDerivedKeysBadInput checks that a KeyDeriver's calls are validated
// as any other's: bad input is refused before the strategy runs.
func TestDerivedKeysBadInput(t *testing.T) {
	d := &deriving{}
	lim, err := New(nopStore{}, d)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		subject string
		limits  []Limit
		want    error
	}{
		{"", []Limit{PerSecond(1)}, ErrInvalidKey},
		{"u", []Limit{PerSecond(0)}, ErrInvalidLimit},
		{"u", []Limit{PerSecond(1), PerSecond(2)}, ErrInvalidLimit},
		{"u", nil, ErrInvalidLimit},
	} {
		d.appended = nil
		if _, err := lim.Allow(ctx, c.subject, c.limits...); !errors.Is(err, c.want) {
			t.Errorf("Allow(%q, %v): %v, want %v", c.subject, c.limits, err, c.want)
		}
		if d.appended != nil {
			t.Errorf("Allow(%q, %v): the strategy ran", c.subject, c.limits)
		}
	}
}

// nopStore is a Store for strategies that never call it.
type nopStore struct{ store.Store }
