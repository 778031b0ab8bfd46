package knownbad_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/conformance/knownbad"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// TestBatchOneCostLeavesCostOneAlone: BatchOneCost is documented
// as FixedWindow whose batched calls "send a cost of 1 whatever each
// request asks for". A request that asks for a cost of 1 is therefore sent
// exactly as FixedWindow sends it. FixedWindow's BatchScript
// sends a cost of 1 as the limits' arguments alone ({rate, window}), so
// a BatchOneCost that set args[0] = 1 would overwrite the limit's rate, not the cost.
func TestBatchOneCostLeavesCostOneAlone(t *testing.T) {
	req := limiter.Request{
		Keys:   []string{"x:{s}:3600000ms"},
		Limits: []limiter.Limit{limiter.PerHour(5)},
		Cost:   1,
	}
	_, want, err := strategy.NewFixedWindow().BatchScript(req)
	if err != nil {
		t.Fatal(err)
	}
	_, got, err := knownbad.BatchOneCost{}.BatchScript(req)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("BatchOneCost sends %v for a request of cost 1; FixedWindow sends %v (a cost of 1 is already right: only the rate can have been overwritten)", got, want)
	}
}

// TestBatchOneCostAdmitsTheRate: with one limit of 5 per hour and
// asks of cost 1 (which BatchOneCost is supposed to get right), AllowMany
// admits exactly 5 calls. (The script is sent rate 1, and its packed reply
// reset·(2·1+1)+count is unpacked with the radix of rate 5: the decisions
// are garbage.)
func TestBatchOneCostAdmitsTheRate(t *testing.T) {
	m := redistest.NewMini(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	lim, err := limiter.New(goredis.New(rdb), knownbad.BatchOneCost{}, limiter.WithPrefix("t"))
	if err != nil {
		t.Fatal(err)
	}
	five := limiter.PerHour(5)
	admitted := 0
	for range 6 {
		a := lim.AllowMany(context.Background(), []limiter.Ask{{Key: "u", Cost: 1, Limits: []limiter.Limit{five}}})
		if a[0].Err != nil {
			t.Fatal(a[0].Err)
		}
		if a[0].Result.Allowed {
			admitted++
		}
	}
	if admitted != 5 {
		t.Errorf("AllowMany of cost 1 against 5/hour admitted %d of 6; want 5 (the script was sent rate 1 and its packed reply is read with radix 2·5+1)", admitted)
	}
}
