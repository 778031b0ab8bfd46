package limiter_test

import (
	"testing"
	"time"

	"github.com/quotagate/limiter"
)

func TestBinder(t *testing.T) {
	type add struct {
		remaining    int64
		reset, retry time.Duration
	}
	for _, tc := range []struct {
		name    string
		adds    []add
		allowed bool
		want    limiter.Result
	}{
		{"allowed: least remaining binds", []add{{5, time.Second, 0}, {2, time.Minute, 0}, {3, time.Hour, 0}}, true,
			limiter.Result{Allowed: true, Remaining: 2, ResetAfter: time.Minute, Index: 1}},
		{"allowed: of equals, the one full again last binds", []add{{0, time.Second, 0}, {0, 24 * time.Hour, 0}, {0, time.Minute, 0}}, true,
			limiter.Result{Allowed: true, Remaining: 0, ResetAfter: 24 * time.Hour, Index: 1}},
		{"allowed: of equals in every way, the first binds", []add{{2, time.Minute, 0}, {2, time.Minute, 0}}, true,
			limiter.Result{Allowed: true, Remaining: 2, ResetAfter: time.Minute, Index: 0}},
		{"denied: the longest wait binds", []add{{0, time.Second, time.Second}, {4, time.Minute, 0}, {0, time.Hour, time.Hour}}, false,
			limiter.Result{Remaining: 0, ResetAfter: time.Hour, RetryAfter: time.Hour, Index: 2}},
		{"denied: never beats any wait, the first never stays", []add{{1, time.Second, -1}, {0, time.Hour, time.Hour}, {0, time.Minute, -1}}, false,
			limiter.Result{Remaining: 1, ResetAfter: time.Second, RetryAfter: -1, Index: 0}},
		{"negative remaining reads 0", []add{{-3, time.Second, time.Second}}, false,
			limiter.Result{Remaining: 0, ResetAfter: time.Second, RetryAfter: time.Second, Index: 0}},
	} {
		var b limiter.Binder
		for i, a := range tc.adds {
			b.Add(i, a.remaining, a.reset, a.retry)
		}
		if got := b.Result(tc.allowed); got != tc.want {
			t.Errorf("%s: Result = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
