package limiter_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/storetest"
	"github.com/quotagate/limiter/strategy"
)

// TestAllowManySubjectOrderAcrossRounds: asks of one subject are decided
// in their order even when the first is answered "another window" and
// goes again: the server's clock has stepped a second past the app's
// estimate, into the next window of 2 s (not of the hour), so the first
// ask (the hour's 1 and 4 per 2 s) is counted nowhere and goes again,
// while the second (the hour's alone) names the right window. Through
// AllowMany, on one server (the many-request script) and through
// pipelines, the first ask gets the hour's only unit and the second is
// denied, as with two Allow calls. The second had been counted beside the
// first, and took its unit.
//
// With 63 asks of other subjects before them, the two go in two calls of
// the many-request script (64 asks each): the second waits for the next
// round.
func TestAllowManySubjectOrderAcrossRounds(t *testing.T) {
	for _, mode := range []string{"Allow", "AllowMany on one server", "AllowMany through pipelines", "AllowMany on one server, two calls"} {
		m, st := newMini(t)
		// the server's clock 1.5 s into a window of 2 s, 30 minutes into
		// an hour
		const target = 30*60*1000 + 1500
		ms := m.Now().UnixMilli()
		m.Advance(time.Duration((target-ms%3600000+3600000)%3600000) * time.Millisecond)
		app := m.Now() // the app's clock stays here
		lim, err := limiter.New(&storetest.Batches{Store: st, One: strings.HasPrefix(mode, "AllowMany on one server")},
			strategy.NewAlignedWindow(strategy.WithAlignedClock(func() time.Time { return app })))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if r, err := lim.Allow(ctx, "warm", limiter.Per(100, 2*time.Second)); err != nil || !r.Allowed {
			t.Fatalf("%s: warm-up: %+v, %v", mode, r, err)
		}
		m.Advance(time.Second)
		hour, twoSec := limiter.PerHour(1), limiter.Per(4, 2*time.Second)
		asks := []limiter.Ask{{Key: "s", Limits: []limiter.Limit{hour, twoSec}}, {Key: "s", Limits: []limiter.Limit{hour}}}
		var ans []limiter.Answer
		if mode == "Allow" {
			for _, a := range asks {
				r, err := lim.Allow(ctx, a.Key, a.Limits...)
				ans = append(ans, limiter.Answer{Result: r, Err: err})
			}
		} else {
			if strings.HasSuffix(mode, "two calls") {
				others := make([]limiter.Ask, 63, 65)
				for i := range others {
					others[i] = limiter.Ask{Key: fmt.Sprintf("other%d", i), Limits: []limiter.Limit{hour}}
				}
				asks = append(others, asks...)
			}
			ans = lim.AllowMany(ctx, asks)
			ans = ans[len(ans)-2:]
		}
		if ans[0].Err != nil || ans[1].Err != nil || !ans[0].Result.Allowed || ans[1].Result.Allowed {
			t.Errorf("%s: [%+v, %v] [%+v, %v]; want the first admitted and the second denied, in their order", mode, ans[0].Result, ans[0].Err, ans[1].Result, ans[1].Err)
		}
	}
}
