package strategy_test

import (
	"context"
	"sync"
	"testing"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// argsRecorder records how many arguments each script call sends.
type argsRecorder struct {
	store.Store
	mu   sync.Mutex
	sent []int
}

func (a *argsRecorder) EvalSha(ctx context.Context, sha string, keys []string, args []any) (any, error) {
	a.mu.Lock()
	a.sent = append(a.sent, len(args))
	a.mu.Unlock()
	return a.Store.EvalSha(ctx, sha, keys, args)
}

func (a *argsRecorder) take() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.sent
	a.sent = nil
	return out
}

// TestCommonCallSendsTheLimitsArgumentsAlone: a cost of 1 that writes (the
// common call) sends each limit's arguments (two; three for a token
// bucket) and nothing else, since
// every argument costs the server time; a peek or another cost sends the
// cost and the peek flag first. The scripts decide both forms alike, on a
// redis-server: every decision below is checked, and the counts run on
// from one form to the other.
func TestCommonCallSendsTheLimitsArgumentsAlone(t *testing.T) {
	rdb := realServer(t)
	ctx := context.Background()
	ten := limiter.PerHour(10)
	six := limiter.PerMinute(6)
	for name, s := range map[string]limiter.Strategy{"FixedWindow": strategy.NewFixedWindow(), "GCRA": strategy.NewGCRA(), "SlidingWindow": strategy.NewSlidingWindow(), "TokenBucket": strategy.NewTokenBucket()} {
		t.Run(name, func(t *testing.T) {
			rec := &argsRecorder{Store: goredis.New(rdb)}
			lim := newLim(t, rec, s)
			subject := "compact-" + name
			per := 2 // arguments per limit
			if name == "TokenBucket" {
				per = 3
			}
			// one limit: 1, then 2, then a peek, then 1 until denied
			want := []struct {
				cost    int64
				peek    bool
				allowed bool
				left    int64
				args    int
			}{
				{1, false, true, 9, 2},
				{2, false, true, 7, 4},
				{1, true, true, 7, 4},
				{1, false, true, 6, 2},
				{6, false, true, 0, 4},
				{1, false, false, 0, 2},
			}
			for i, w := range want {
				var r limiter.Result
				var err error
				if w.peek {
					r, err = lim.Peek(ctx, subject, ten)
				} else {
					r, err = lim.AllowN(ctx, subject, w.cost, ten)
				}
				if err != nil || r.Allowed != w.allowed || r.Remaining != w.left {
					t.Fatalf("call %d (cost %d, peek %v): %+v, %v; want allowed=%v with %d left", i+1, w.cost, w.peek, r, err, w.allowed, w.left)
				}
				args := per // the compact form; the full one adds cost and peek
				if w.args == 4 {
					args = 2 + per
				}
				if sent := rec.take(); len(sent) != 1 || sent[0] != args {
					t.Fatalf("call %d (cost %d, peek %v) sent %v arguments; want one script call of %d", i+1, w.cost, w.peek, sent, args)
				}
			}
			// two limits, all or nothing: the second binds after 6
			for i := range 7 {
				r, err := lim.Allow(ctx, subject+"-two", ten, six)
				if err != nil || r.Allowed != (i < 6) {
					t.Fatalf("two limits, call %d: %+v, %v; want allowed=%v", i+1, r, err, i < 6)
				}
				if sent := rec.take(); len(sent) != 1 || sent[0] != 2*per {
					t.Fatalf("two limits, call %d sent %v arguments; want one script call of %d", i+1, sent, 2*per)
				}
			}
			if r, err := lim.Peek(ctx, subject+"-two", ten); err != nil || r.Remaining != 4 {
				t.Fatalf("after two limits: ten has %+v, %v; want 4 left (a denied call consumed nothing)", r, err)
			}
		})
	}
}
