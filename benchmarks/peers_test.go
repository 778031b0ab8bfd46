package benchmarks

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/goredisstore.v9"
	ulule "github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/benchkit"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store/goredis"
	rueidisstore "github.com/quotagate/limiter/store/rueidis"
	"github.com/quotagate/limiter/strategy"
)

// BenchmarkPeers runs one workload, every decision admitted (a rate no run
// reaches), on 4 subjects per caller, through the limiter and its peers on
// one redis-server, at 16 and 64 callers in interleaved rounds, and logs
// the comparison table: each one's decisions per second and its ratio to
// go-redis/redis_rate's. The limiter runs FixedWindow and GCRA through
// go-redis (by default its concurrent calls share pipelines; also with
// goredis.WithSharedPipelines(0), each call on its own connection as the
// peers send theirs) and FixedWindow through rueidis; the peers are redis_rate
// (GCRA, Lua), ulule/limiter (a fixed window, Lua) and throttled (GCRA
// with GET/SET compare-and-swap), each through go-redis; then redis_rate,
// the limiter and ulule again through go-redis's AutoPipeliner (the
// limiter with goredis.WithAutoPipeline). One measurement takes about two
// minutes; run it with -benchtime 1x:
//
//	cd benchmarks && go test -v -run '^$' -bench Peers -benchtime 1x .
func BenchmarkPeers(b *testing.B) {
	srv := redistest.StartServer(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 128, MaxRetries: -1})
	b.Cleanup(func() { _ = rdb.Close() })
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, ForceSingleClient: true,
		DisableCache: true, AlwaysPipelining: true, PipelineMultiplex: -1, Dialer: net.Dialer{KeepAlive: -1, KeepAliveConfig: net.KeepAliveConfig{Enable: true}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(rc.Close)

	const big = 1 << 40
	fixed := limiter.PerSecond(big)
	gcra := limiter.Limit{Rate: gcraRate, Burst: gcraBurst, Period: time.Second}
	ours := func(name string, lim *limiter.Limiter, err error, l limiter.Limit) benchkit.Variant {
		if err != nil {
			b.Fatal(err)
		}
		return benchkit.Variant{Name: name, Decide: func(ctx context.Context, s string) error {
			r, err := lim.Allow(ctx, s, l)
			if err == nil && !r.Allowed {
				err = fmt.Errorf("%s denied %s", name, s)
			}
			return err
		}}
	}
	ap, err := rdb.AutoPipeline()
	if err != nil {
		b.Fatal(err)
	}
	fwGoredis, err1 := limiter.New(goredis.New(rdb), strategy.NewFixedWindow(), limiter.WithPrefix("fw-goredis"))
	fwAP, err4 := limiter.New(goredis.New(rdb, goredis.WithAutoPipeline()), strategy.NewFixedWindow(), limiter.WithPrefix("fw-goredis-ap"))
	gcraAP, err5 := limiter.New(goredis.New(rdb, goredis.WithAutoPipeline()), strategy.NewGCRA(), limiter.WithPrefix("gcra-goredis-ap"))
	fwRueidis, err2 := limiter.New(rueidisstore.New(rc), strategy.NewFixedWindow(), limiter.WithPrefix("fw-rueidis"))
	gcraGoredis, err3 := limiter.New(goredis.New(rdb), strategy.NewGCRA(), limiter.WithPrefix("gcra-goredis"))
	fwUnshared, err6 := limiter.New(goredis.New(rdb, goredis.WithSharedPipelines(0)), strategy.NewFixedWindow(), limiter.WithPrefix("fw-goredis-unshared"))
	gcraUnshared, err7 := limiter.New(goredis.New(rdb, goredis.WithSharedPipelines(0)), strategy.NewGCRA(), limiter.WithPrefix("gcra-goredis-unshared"))

	rr := redis_rate.NewLimiter(rdb)
	rrLimit := redis_rate.Limit{Rate: gcraRate, Burst: gcraBurst, Period: time.Second}
	ulStore, err := ulredis.NewStoreWithOptions(rdb, ulule.StoreOptions{Prefix: "ulule"})
	if err != nil {
		b.Fatal(err)
	}
	ul := ulule.New(ulStore, ulule.Rate{Period: time.Second, Limit: big})
	rrAP := redis_rate.NewLimiter(ap)
	ulStoreAP, err := ulredis.NewStoreWithOptions(ap, ulule.StoreOptions{Prefix: "ulule-ap"})
	if err != nil {
		b.Fatal(err)
	}
	ulAP := ulule.New(ulStoreAP, ulule.Rate{Period: time.Second, Limit: big})
	thStore, err := goredisstore.NewCtx(rdb, "throttled:")
	if err != nil {
		b.Fatal(err)
	}
	th, err := throttled.NewGCRARateLimiterCtx(thStore, throttled.RateQuota{MaxRate: throttled.PerSec(gcraRate), MaxBurst: gcraBurst})
	if err != nil {
		b.Fatal(err)
	}
	variants := []benchkit.Variant{
		{Name: "go-redis/redis_rate (GCRA)", Decide: func(ctx context.Context, s string) error {
			r, err := rr.Allow(ctx, s, rrLimit)
			if err == nil && r.Allowed != 1 {
				err = fmt.Errorf("redis_rate denied %s", s)
			}
			return err
		}},
		ours("limiter FixedWindow, go-redis", fwGoredis, err1, fixed),
		ours("limiter FixedWindow, rueidis", fwRueidis, err2, fixed),
		ours("limiter GCRA, go-redis", gcraGoredis, err3, gcra),
		{Name: "ulule/limiter (fixed window)", Decide: func(ctx context.Context, s string) error {
			r, err := ul.Get(ctx, s)
			if err == nil && r.Reached {
				err = fmt.Errorf("ulule denied %s", s)
			}
			return err
		}},
		{Name: "throttled (GCRA)", Decide: func(ctx context.Context, s string) error {
			limited, _, err := th.RateLimitCtx(ctx, s, 1)
			if err == nil && limited {
				err = fmt.Errorf("throttled denied %s", s)
			}
			return err
		}},
		// the limiter with every call on its own connection, as the
		// peers send theirs
		ours("limiter FixedWindow, go-redis, unshared", fwUnshared, err6, fixed),
		ours("limiter GCRA, go-redis, unshared", gcraUnshared, err7, gcra),
		// the same through go-redis's AutoPipeliner, which shares round
		// trips among goroutines
		{Name: "go-redis/redis_rate, AutoPipeliner", Decide: func(ctx context.Context, s string) error {
			r, err := rrAP.Allow(ctx, s, rrLimit)
			if err == nil && r.Allowed != 1 {
				err = fmt.Errorf("redis_rate denied %s", s)
			}
			return err
		}},
		ours("limiter FixedWindow, go-redis AutoPipeliner", fwAP, err4, fixed),
		ours("limiter GCRA, go-redis AutoPipeliner", gcraAP, err5, gcra),
		{Name: "ulule/limiter, AutoPipeliner", Decide: func(ctx context.Context, s string) error {
			r, err := ulAP.Get(ctx, s)
			if err == nil && r.Reached {
				err = fmt.Errorf("ulule denied %s", s)
			}
			return err
		}},
	}
	kit := benchkit.New(b, []int{16, 64}, nil)
	for range b.N {
		rates := map[int][]float64{}
		for _, c := range kit.Callers {
			tallies, _, err := kit.Compare(c, benchkit.RatioRounds, benchkit.RatioWarmUp, benchkit.RatioRoundTime, variants)
			if err != nil {
				b.Fatal(err)
			}
			for i, t := range tallies {
				rates[c] = append(rates[c], t.Rate())
				if i > 0 {
					b.ReportMetric(t.Rate()/tallies[0].Rate(), fmt.Sprintf("%s-x-redis_rate-c%d", metricName(variants[i].Name), c))
				}
			}
		}
		var t strings.Builder
		t.WriteString("\n| | 16 callers: decisions/s | ÷ redis_rate | 64 callers: decisions/s | ÷ redis_rate |\n|---|---|---|---|---|\n")
		for i, v := range variants {
			fmt.Fprintf(&t, "| %s | %.0f | %.2f | %.0f | %.2f |\n", v.Name, rates[16][i], rates[16][i]/rates[16][0], rates[64][i], rates[64][i]/rates[64][0])
		}
		b.Log(t.String())
	}
}

// metricName makes a variant's name a metric unit (no spaces).
func metricName(s string) string {
	s = strings.NewReplacer(" ", "", ",", "-", "(", "", ")", "", "/", "-").Replace(s)
	return s
}
