package benchmarks

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
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

// gcraIntervals are the two kinds of limit GCRA holds differently: an
// emission interval of whole milliseconds (most limits: 10/s, 100/min;
// here 100/s, whose burst of a million outlasts a run), whose state is
// its key's expiry, and one of microseconds (a million per second), whose
// state is a TAT on TIME's clock. (At 100/s each decision moves a key's
// expiry 10 ms ahead and the next decision on it comes within about a
// millisecond, so it decides on a live key, as a subject that uses its
// limit does; at 1000/s half the keys would have expired in between.)
var gcraIntervals = []struct {
	name string
	rate int64
}{{"interval=10ms", 100}, {"interval=1us", gcraRate}}

// BenchmarkGCRAvsRedisRate compares strategy.GCRA with go-redis/redis_rate
// (also GCRA in Lua) through go-redis on one redis-server.
//
// Decisions per second, at 16 and 64 callers, in interleaved rounds (the
// medians of the rounds' ratios):
//   - x-redis_rate-cN: the limiter over redis_rate, both on one
//     *redis.Client (the limiter's concurrent calls sharing pipelines, as
//     goredis.New does by default);
//   - unshared-x-redis_rate-cN: the same with every call on its own
//     connection (goredis.WithSharedPipelines(0)), as redis_rate sends
//     them;
//   - ap-x-redis_rate-ap-cN: the same, both through the client's
//     AutoPipeliner (goredis.WithAutoPipeline for the limiter);
//   - ap-x-redis_rate-cN: the limiter through the AutoPipeliner over
//     redis_rate on the client.
//
// The CPU time per decision of each variant in rounds of its own (see
// reportCPU): this process's and the server's, and how many decisions the
// limiter makes for each of redis_rate's with the same CPU time. Through
// one client both spend about the same CPU time per decision in the
// client, so the difference in the server's is what the limiter gains.
//
// The server's time per decision, the usec_per_call of EVALSHA in INFO
// commandstats after a CONFIG RESETSTAT: each script alone for 400 ms at 16
// callers, in 6 interleaved rounds, as a raw EVALSHA through one client
// with its arguments built once (server-us-<script>, the median), and the
// median of the rounds' ratios to redis_rate's script
// (server-<script>-x-redis_rate). On a machine whose client and server
// share the cores, the server's clock also counts the time the client's
// work takes the CPU from it: through each library, the one whose client
// works more would look slower on the server too, so every script is sent
// alike. Beside the two strategies, the floors: a script that makes only
// a GCRA's Redis calls and decides nothing (gcra-floor-3: TIME, GET,
// SET PX; gcra-floor-2: TIME, SET PX GET; gcra-floor-1: TIME alone).
//
// Both on a limit of 100/s and of a million per second (gcraIntervals),
// each a sub-benchmark on the same server.
//
// One measurement takes about two minutes; run it with -benchtime 1x.
func BenchmarkGCRAvsRedisRate(b *testing.B) {
	for _, iv := range gcraIntervals {
		b.Run(iv.name, func(b *testing.B) { gcraVsRedisRate(b, iv.rate) })
	}
}

func gcraVsRedisRate(b *testing.B, rate int64) {
	srv := redistest.StartServer(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 128, MaxRetries: -1})
	b.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	ap, err := rdb.AutoPipeline()
	if err != nil {
		b.Fatal(err)
	}

	rrLimit := redis_rate.Limit{Rate: int(rate), Burst: gcraBurst, Period: time.Second}
	ours := limiter.Limit{Rate: rate, Burst: gcraBurst, Period: time.Second}
	viaRR := func(name string, rr *redis_rate.Limiter) benchkit.Variant {
		return benchkit.Variant{Name: name, Decide: func(ctx context.Context, subject string) error {
			r, err := rr.Allow(ctx, subject, rrLimit)
			if err == nil && r.Allowed != 1 {
				err = fmt.Errorf("%s denied %s: %+v", name, subject, r)
			}
			return err
		}}
	}
	viaLimiter := func(name string, opts ...goredis.Option) benchkit.Variant {
		lim, err := limiter.New(goredis.New(rdb, opts...), strategy.NewGCRA(), limiter.WithPrefix(name))
		if err != nil {
			b.Fatal(err)
		}
		return benchkit.Variant{Name: name, Decide: func(ctx context.Context, subject string) error {
			r, err := lim.Allow(ctx, subject, ours)
			if err == nil && !r.Allowed {
				err = fmt.Errorf("%s denied %s: %+v", name, subject, r)
			}
			return err
		}}
	}
	variants := []benchkit.Variant{
		viaRR("redis_rate", redis_rate.NewLimiter(rdb)),
		viaLimiter("limiter"),
		viaRR("redis_rate-autopipeline", redis_rate.NewLimiter(ap)),
		viaLimiter("limiter-autopipeline", goredis.WithAutoPipeline()),
		viaLimiter("limiter-unshared", goredis.WithSharedPipelines(0)),
	}
	alone := serverTimeVariants(b, ctx, rdb, srv.Addr(), rrLimit)
	kit := benchkit.New(b, []int{16, 64}, nil)
	for range b.N {
		for _, c := range kit.Callers {
			tallies, ratios, err := kit.Compare(c, benchkit.RatioRounds, benchkit.RatioWarmUp, benchkit.RatioRoundTime, variants)
			if err != nil {
				b.Fatal(err)
			}
			for i, v := range variants {
				b.ReportMetric(tallies[i].Rate(), fmt.Sprintf("%s-decisions/s-c%d", v.Name, c))
			}
			apOverAP := make([]float64, len(ratios[3]))
			for r := range apOverAP {
				apOverAP[r] = ratios[3][r] / ratios[2][r]
			}
			b.ReportMetric(benchkit.Median(ratios[1]), fmt.Sprintf("x-redis_rate-c%d", c))
			b.ReportMetric(benchkit.Median(apOverAP), fmt.Sprintf("ap-x-redis_rate-ap-c%d", c))
			b.ReportMetric(benchkit.Median(ratios[3]), fmt.Sprintf("ap-x-redis_rate-c%d", c))
			b.ReportMetric(benchkit.Median(ratios[4]), fmt.Sprintf("unshared-x-redis_rate-c%d", c))
			if err := reportCPU(b, kit, c, variants, func() (time.Duration, error) { return serverCPU(ctx, rdb) }); err != nil {
				b.Fatal(err)
			}
		}
		us, err := kit.ServerRounds(16, 6, 400*time.Millisecond, alone,
			func() error { return rdb.ConfigResetStat(ctx).Err() },
			func() (float64, error) { return evalshaMicros(ctx, rdb) })
		if err != nil {
			b.Fatal(err)
		}
		for i, v := range alone {
			b.ReportMetric(benchkit.Median(us[i]), "server-us-"+v.Name)
			if i == 0 {
				continue
			}
			x := benchkit.RoundRatios(us[i], us[0])
			b.ReportMetric(benchkit.Median(x), "server-"+v.Name+"-x-redis_rate")
		}
	}
}

// serverTimeVariants returns the scripts whose server time
// BenchmarkGCRAvsRedisRate measures, each a raw EVALSHA through rdb with
// its arguments built once: redis_rate's (its call read off the wire of a
// client of its own), the limiter's GCRA with the arguments the strategy
// sends for lim, and the floors.
func serverTimeVariants(b *testing.B, ctx context.Context, rdb *redis.Client, addr string, lim redis_rate.Limit) []benchkit.Variant {
	b.Helper()
	spy := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer spy.Close()
	var once sync.Once
	var rrArgs []any
	spy.AddHook(evalshaSpy(func(args []any) { once.Do(func() { rrArgs = append([]any(nil), args...) }) }))
	if _, err := redis_rate.NewLimiter(spy).Allow(ctx, "spy", lim); err != nil {
		b.Fatal(err)
	}
	// EVALSHA sha numkeys key args...
	if len(rrArgs) != 8 || fmt.Sprint(rrArgs[2]) != "1" {
		b.Fatalf("redis_rate's call: %v", rrArgs)
	}
	rrSHA, rrKeyPrefix := fmt.Sprint(rrArgs[1]), strings.TrimSuffix(fmt.Sprint(rrArgs[3]), "spy")
	rrRest := rrArgs[4:]
	raw := func(name, sha string, key func(subject string) string, args ...any) benchkit.Variant {
		return benchkit.Variant{Name: name, Decide: func(ctx context.Context, subject string) error {
			return rdb.EvalSha(ctx, sha, []string{key(subject)}, args...).Err()
		}}
	}
	for _, src := range []string{strategy.GCRAScript().Source(), benchkit.GCRAFloorScript().Source()} {
		if err := rdb.ScriptLoad(ctx, src).Err(); err != nil {
			b.Fatal(err)
		}
	}
	keyed := func(prefix string) func(string) string {
		return func(subject string) string { return prefix + subject }
	}
	floor := benchkit.GCRAFloorScript().Hash()
	// the strategy's arguments for a cost of 1, written: the emission
	// interval in µs, the burst
	interval := int64(time.Second/time.Microsecond) / int64(lim.Rate)
	return []benchkit.Variant{
		raw("redis_rate", rrSHA, keyed(rrKeyPrefix), rrRest...),
		raw("limiter", strategy.GCRAScript().Hash(), keyed("st-gcra:{"), interval, gcraBurst),
		raw("gcra-floor-3", floor, keyed("st-floor3:"), "3"),
		raw("gcra-floor-2", floor, keyed("st-floor2:"), "2"),
		raw("gcra-floor-1", floor, keyed("st-floor1:"), "1"),
	}
}

// evalshaSpy is a go-redis hook that hands the arguments of each EVALSHA
// to seen.
type evalshaSpy func(args []any)

func (evalshaSpy) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s evalshaSpy) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			s(cmd.Args())
		}
		return next(ctx, cmd)
	}
}

func (evalshaSpy) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// reportCPU runs the variants (redis_rate and the limiter on the client,
// then both through the AutoPipeliner) in rounds as Compare does, and
// reports each one's CPU time per decision, this process's
// (client-cpu-us-<name>-cN) and the server's (server-cpu-us-<name>-cN),
// the medians of the rounds, and the medians of the rounds' ratios of
// redis_rate's CPU time per decision, client and server together, to the
// limiter's (cpu-x-redis_rate-cN, both on the client; ap-cpu-x-redis_rate-
// ap-cN, both through the AutoPipeliner): how many decisions the limiter
// makes for each of redis_rate's with the same CPU. On a machine whose
// client and server share the cores and are busy, decisions/s follow it.
func reportCPU(b *testing.B, kit *benchkit.Kit, c int, variants []benchkit.Variant, server func() (time.Duration, error)) error {
	cpu, err := kit.CPURounds(c, benchkit.RatioRounds, benchkit.RatioRoundTime, variants, server)
	if err != nil {
		return err
	}
	for i, v := range variants {
		var cl, sv []float64
		for _, r := range cpu[i] {
			cl = append(cl, r.ClientMicros())
			sv = append(sv, r.ServerMicros())
		}
		b.ReportMetric(benchkit.Median(cl), fmt.Sprintf("client-cpu-us-%s-c%d", v.Name, c))
		b.ReportMetric(benchkit.Median(sv), fmt.Sprintf("server-cpu-us-%s-c%d", v.Name, c))
	}
	per := func(base, x int) float64 {
		var rs []float64
		for r := range cpu[x] {
			rs = append(rs, cpu[base][r].TotalMicros()/cpu[x][r].TotalMicros())
		}
		return benchkit.Median(rs)
	}
	b.ReportMetric(per(0, 1), fmt.Sprintf("cpu-x-redis_rate-c%d", c))
	b.ReportMetric(per(2, 3), fmt.Sprintf("ap-cpu-x-redis_rate-ap-c%d", c))
	return nil
}

// serverCPU reads the server process's CPU time so far, user and system
// (INFO cpu).
func serverCPU(ctx context.Context, rdb *redis.Client) (time.Duration, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	found := 0
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		for _, f := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(line, f); ok {
				s, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return 0, fmt.Errorf("INFO cpu: %q: %w", line, err)
				}
				sum += time.Duration(s * float64(time.Second))
				found++
			}
		}
	}
	if found != 2 {
		return 0, fmt.Errorf("no used_cpu_sys and used_cpu_user in INFO cpu: %q", info)
	}
	return sum, nil
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
