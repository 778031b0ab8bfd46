package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// A phone number may ask for 3 login codes per minute.
func ExampleLimiter_Allow() {
	mr, _ := miniredis.Run() // any Redis: a server, a Cluster, miniredis
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	defer rdb.Close()

	lim, err := limiter.New(goredis.New(rdb), strategy.NewFixedWindow(), limiter.WithPrefix("sms"))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for i := 0; i < 4; i++ {
		r, err := lim.Allow(ctx, "+15550100", limiter.PerMinute(3))
		if err != nil {
			panic(err)
		}
		fmt.Printf("allowed=%v remaining=%d retry-after=%s\n", r.Allowed, r.Remaining, r.RetryAfter)
	}
	// Output:
	// allowed=true remaining=2 retry-after=0s
	// allowed=true remaining=1 retry-after=0s
	// allowed=true remaining=0 retry-after=0s
	// allowed=false remaining=0 retry-after=1m0s
}

// Several rules for one appkey+method are one atomic decision: a request
// refused by the per-second rule consumes nothing from the daily one.
func ExampleLimiter_Allow_rules() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	defer rdb.Close()
	lim, _ := limiter.New(goredis.New(rdb), strategy.NewFixedWindow())

	ctx := context.Background()
	rules := []limiter.Limit{limiter.PerSecond(2).Named("qps"), limiter.PerDay(1000).Named("qpd")}
	for i := 0; i < 3; i++ {
		r, _ := lim.Allow(ctx, "appkey-42:order.create", rules...)
		fmt.Printf("allowed=%v binding=%s remaining=%d\n", r.Allowed, r.Limit.Name, r.Remaining)
	}
	daily, _ := lim.Peek(ctx, "appkey-42:order.create", rules[1])
	fmt.Println("daily remaining:", daily.Remaining)
	// Output:
	// allowed=true binding=qps remaining=1
	// allowed=true binding=qps remaining=0
	// allowed=false binding=qps remaining=0
	// daily remaining: 998
}

// AllowMany decides many subjects at once, in one round trip per Redis
// server; each ask gets its own answer, and a bad ask its own error.
func ExampleLimiter_AllowMany() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	defer rdb.Close()
	lim, _ := limiter.New(goredis.New(rdb), strategy.NewFixedWindow())

	perMinute := []limiter.Limit{limiter.PerMinute(2)}
	asks := []limiter.Ask{
		{Key: "user:1", Limits: perMinute},
		{Key: "user:2", Cost: 2, Limits: perMinute},
		{Key: "user:3", Cost: 3, Limits: perMinute},
		{Key: "", Limits: perMinute},
	}
	for i, a := range lim.AllowMany(context.Background(), asks) {
		fmt.Printf("%q: allowed=%v remaining=%d err=%v\n", asks[i].Key, a.Result.Allowed, a.Result.Remaining, a.Err)
	}
	// Output:
	// "user:1": allowed=true remaining=1 err=<nil>
	// "user:2": allowed=true remaining=0 err=<nil>
	// "user:3": allowed=false remaining=2 err=<nil>
	// "": allowed=false remaining=0 err=limiter: invalid key: empty key
}

// With FailOpen a decision Redis could not make admits the request and says
// so: Degraded is set and Cause holds the error.
func ExampleWithFailMode() {
	mr, _ := miniredis.Run()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	defer rdb.Close()
	lim, _ := limiter.New(goredis.New(rdb), strategy.NewFixedWindow(), limiter.WithFailMode(limiter.FailOpen))
	mr.Close() // Redis goes away

	r, err := lim.Allow(context.Background(), "user:7", limiter.PerSecond(10))
	fmt.Println(r.Allowed, r.Degraded, r.Cause != nil, err)
	// Output:
	// true true true <nil>
}

// A worker sends at most 10 messages per second, 2 at once: Wait blocks
// until the next one may go.
func ExampleLimiter_Wait() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	defer rdb.Close()

	// An embedded miniredis moves its clock (TIME and key expiry) only
	// when told: here Wait's sleep moves it, so the example runs at once.
	// On a Redis server, leave WithSleep out: Wait sleeps on a timer.
	now := time.Now()
	mr.SetTime(now)
	var slept time.Duration
	sleep := limiter.WithSleep(func(ctx context.Context, d time.Duration) error {
		slept += d
		now = now.Add(d)
		mr.SetTime(now)
		mr.FastForward(d)
		return ctx.Err()
	})
	lim, err := limiter.New(goredis.New(rdb), strategy.NewGCRA(), limiter.WithPrefix("mail"), sleep)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l := limiter.Limit{Rate: 10, Period: time.Second, Burst: 2}
	for i := 0; i < 3; i++ {
		if _, err := lim.Wait(ctx, "worker-1", l); err != nil {
			panic(err)
		}
	}
	// The burst of 2 went at once; the third waited one emission interval
	// (and up to a millisecond of jitter).
	fmt.Println(slept >= 100*time.Millisecond && slept <= 101*time.Millisecond)
	r, err := lim.WaitN(ctx, "worker-1", 3, l)
	fmt.Println(r.RetryAfter, errors.Is(err, limiter.ErrNeverAdmitted))
	// Output:
	// true
	// -1ns true
}

// A process that leases quota for a hot subject gives what it did not use
// back before it stops, for the other processes to admit.
func ExampleLimiter_ReturnLeases() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	mr.SetTime(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)) // a fixed clock keeps the output exact
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	defer rdb.Close()
	lim, _ := limiter.New(goredis.New(rdb), strategy.NewFixedWindow(), limiter.WithQuotaLease(20))
	ctx := context.Background()
	hourly := limiter.PerHour(1000)

	for i := 0; i < 5; i++ {
		r, _ := lim.Allow(ctx, "api-key-7", hourly) // the first takes 20 units, all five are admitted from them
		fmt.Printf("allowed=%v leased=%v\n", r.Allowed, r.Leased)
	}
	n, err := lim.ReturnLeases(ctx, 0) // at shutdown: every lease, however recently used
	fmt.Println("returned:", n, err)
	key, _ := limiter.Key(limiter.DefaultPrefix, "api-key-7", hourly)
	v, _ := mr.Get(key)
	fmt.Println("counted in Redis:", v)
	// Output:
	// allowed=true leased=true
	// allowed=true leased=true
	// allowed=true leased=true
	// allowed=true leased=true
	// allowed=true leased=true
	// returned: 15 <nil>
	// counted in Redis: 5
}
