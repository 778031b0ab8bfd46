package limiterprom_test

import (
	"context"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/extra/limiterprom"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// TestNonUTF8RuleNameDoesNotPanic: the Limiter decides a Limit whose Name
// is not UTF-8 (only its length is checked); the Observer's label must not
// panic on it (prometheus' WithLabelValues did, inside lim.Allow, after
// Redis counted the request).
func TestNonUTF8RuleNameDoesNotPanic(t *testing.T) {
	obs, err := limiterprom.New(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	lim, err := limiter.New(goredis.New(rdb), strategy.NewFixedWindow(), limiter.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("lim.Allow with a limit named %q panicked in the Observer: %v (Redis keys: %q)", "caf\xe9", p, m.Keys())
		}
	}()
	r, err := lim.Allow(context.Background(), "u", limiter.PerMinute(5).Named("caf\xe9")) // Latin-1 "café"
	t.Logf("decided: %+v, %v", r, err)
}

// TestNonUTF8StrategyIsValidUTF8: a strategy name given to WithStrategy
// that is not UTF-8 is a label value too: New panicked on it
// (WithLabelValues of the duration histogram). Its bytes become U+FFFD.
func TestNonUTF8StrategyIsValidUTF8(t *testing.T) {
	reg := prometheus.NewRegistry()
	var obs *limiterprom.Observer
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("New(WithStrategy(%q)) panicked: %v", "caf\xe9", p)
			}
		}()
		var err error
		if obs, err = limiterprom.New(reg, limiterprom.WithStrategy("caf\xe9")); err != nil {
			t.Fatal(err)
		}
	}()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	lim, err := limiter.New(goredis.New(rdb), strategy.NewFixedWindow(), limiter.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lim.Allow(context.Background(), "u", limiter.PerMinute(5)); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			for _, lp := range mt.GetLabel() {
				if lp.GetName() != "strategy" {
					continue
				}
				seen++
				if lp.GetValue() != "caf\uFFFD" {
					t.Errorf("%s: strategy label %q; want %q", mf.GetName(), lp.GetValue(), "caf\uFFFD")
				}
			}
		}
	}
	if seen == 0 {
		t.Errorf("no metric has a strategy label: %v", mfs)
	}
}
