package rules_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// Rules per appkey+method written in Go: every rule of a subject is one
// decision, and the Decision names the rule that bound it.
func ExampleStatic() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	defer rdb.Close()
	lim, _ := limiter.New(goredis.New(rdb), strategy.NewFixedWindow())

	set := &rules.Set{
		Subjects: map[string][]limiter.Limit{
			"app-42-order.create": {limiter.PerSecond(2).Named("qps"), limiter.PerDay(1000).Named("qpd")},
		},
		Default: rules.DenyUnknown(),
	}
	ctx := context.Background()
	rl, err := rules.New(ctx, lim, rules.Static(set))
	if err != nil {
		panic(err)
	}
	for i := 0; i < 3; i++ {
		d, _ := rl.Allow(ctx, "app-42-order.create")
		fmt.Printf("allowed=%v rule=%s remaining=%d\n", d.Allowed, rules.RuleName(d.Limit), d.Remaining)
	}
	d, _ := rl.Allow(ctx, "app-7-order.create")
	fmt.Printf("unknown subject: allowed=%v default=%v\n", d.Allowed, d.Default)
	// Output:
	// allowed=true rule=qps remaining=1
	// allowed=true rule=qps remaining=0
	// allowed=false rule=qps remaining=0
	// unknown subject: allowed=false default=true
}

// Rules kept in a Redis hash, one field per appkey-method (a JSON list of
// limits): editing it changes the limit on the next reload (Watch polls;
// Reload is immediate) without resetting the count, and a malformed edit
// keeps the last good rules.
func ExampleRedisHash() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	defer rdb.Close()
	st := goredis.New(rdb)
	lim, _ := limiter.New(st, strategy.NewFixedWindow())
	ctx := context.Background()

	rdb.HSet(ctx, "allRateLimitConfigs", "app-42-order.create", `[{"name":"qpm","rate":2,"period":"1m"}]`)
	rl, err := rules.New(ctx, lim, rules.RedisHash{Store: st, Key: "allRateLimitConfigs"})
	if err != nil {
		panic(err)
	}
	show := func() {
		d, _ := rl.Allow(ctx, "app-42-order.create")
		fmt.Printf("allowed=%v remaining=%d\n", d.Allowed, d.Remaining)
	}
	show()
	show()
	show()

	rdb.HSet(ctx, "allRateLimitConfigs", "app-42-order.create", `[{"name":"qpm","rate":3,"period":"1m"}]`)
	changed, err := rl.Reload(ctx)
	fmt.Println("reloaded:", changed, err)
	show() // the count of 2 was kept: one more fits

	rdb.HSet(ctx, "allRateLimitConfigs", "app-42-order.create", `[{"name":"qpm","rate":0,"period":"1m"}]`)
	_, err = rl.Reload(ctx)
	fmt.Println(err)
	show() // still rate 3
	// Output:
	// allowed=true remaining=1
	// allowed=true remaining=0
	// allowed=false remaining=0
	// reloaded: true <nil>
	// allowed=true remaining=0
	// rules: invalid config: redis hash "allRateLimitConfigs": "app-42-order.create"[0].rate: limiter: invalid limit: rate 0 must be positive
	// allowed=false remaining=0
}
