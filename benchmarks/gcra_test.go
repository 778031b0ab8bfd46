package benchmarks

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/benchkit"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// Rates far above what a run reaches, so that every decision is admitted:
// one unit per microsecond, a burst of a million.
const (
	gcraRate  = 1_000_000
	gcraBurst = 1_000_000
)

// BenchmarkGCRAvsRedisRate compares strategy.GCRA with go-redis/redis_rate
// (also GCRA in Lua) through one go-redis client on one redis-server: at 16
// and 64 callers, in interleaved rounds, the limiter's decisions/s over
// redis_rate's (x-redis_rate-cN), and the server's time per decision, the
// usec_per_call of EVALSHA in INFO commandstats, of each alone
// (server-us-limiter, server-us-redis_rate) and their ratio
// (server-x-redis_rate). One measurement takes about 15 s; run it with
// -benchtime 1x.
func BenchmarkGCRAvsRedisRate(b *testing.B) {
	srv := redistest.StartServer(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 128, MaxRetries: -1})
	b.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()

	rr := redis_rate.NewLimiter(rdb)
	rrLimit := redis_rate.Limit{Rate: gcraRate, Burst: gcraBurst, Period: time.Second}
	lim, err := limiter.New(goredis.New(rdb), strategy.NewGCRA())
	if err != nil {
		b.Fatal(err)
	}
	ours := limiter.Limit{Rate: gcraRate, Burst: gcraBurst, Period: time.Second}
	variants := []benchkit.Variant{
		{Name: "redis_rate", Decide: func(ctx context.Context, subject string) error {
			r, err := rr.Allow(ctx, subject, rrLimit)
			if err == nil && r.Allowed != 1 {
				err = fmt.Errorf("redis_rate denied %s: %+v", subject, r)
			}
			return err
		}},
		{Name: "limiter", Decide: func(ctx context.Context, subject string) error {
			r, err := lim.Allow(ctx, subject, ours)
			if err == nil && !r.Allowed {
				err = fmt.Errorf("limiter denied %s: %+v", subject, r)
			}
			return err
		}},
	}
	kit := benchkit.New(b, []int{16, 64}, nil)
	for range b.N {
		for _, c := range kit.Callers {
			tallies, _, err := kit.Compare(c, benchkit.RatioRounds, benchkit.RatioWarmUp, benchkit.RatioRoundTime, variants)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(tallies[0].Rate(), fmt.Sprintf("redis_rate-decisions/s-c%d", c))
			b.ReportMetric(tallies[1].Rate(), fmt.Sprintf("limiter-decisions/s-c%d", c))
			b.ReportMetric(tallies[1].Rate()/tallies[0].Rate(), fmt.Sprintf("x-redis_rate-c%d", c))
		}
		us := make([]float64, len(variants))
		for i, v := range variants {
			if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			if _, _, err := kit.Timed(16, time.Second, v.Decide); err != nil {
				b.Fatal(err)
			}
			if us[i], err = evalshaMicros(ctx, rdb); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(us[0], "server-us-redis_rate")
		b.ReportMetric(us[1], "server-us-limiter")
		b.ReportMetric(us[1]/us[0], "server-x-redis_rate")
	}
}

// evalshaMicros reads the server's mean time per EVALSHA since the last
// CONFIG RESETSTAT.
func evalshaMicros(ctx context.Context, rdb *redis.Client) (float64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "cmdstat_evalsha:")), ",") {
			if v, ok := strings.CutPrefix(f, "usec_per_call="); ok {
				return strconv.ParseFloat(v, 64)
			}
		}
	}
	return 0, fmt.Errorf("no EVALSHA in INFO commandstats: %q", info)
}
