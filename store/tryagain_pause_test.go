package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/quotagate/limiter/store"
)

// TryAgainPause "reports false at once, without waiting, when the pause
// would end after ctx's deadline": the sixth pause is 75 to 100 ms, so with
// 70 ms left it gives up before ctx ends, not when it ends.
func TestTryAgainPauseGivesUpAtOnceBeforeDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 70*time.Millisecond)
	defer cancel()
	start := time.Now()
	ok := store.TryAgainPause(ctx, 6)
	if err := ctx.Err(); ok || err != nil {
		t.Fatalf("TryAgainPause(6) with 70 ms left = %v after %v, ctx %v; want false before ctx ends", ok, time.Since(start), err)
	}
}

// The pauses are "each shortened by a random part of up to a quarter": the
// sixth, 100 ms in full, fits a deadline 100 ms away only when shortened,
// which is nearly always (at most once in 25 is it not).
func TestTryAgainPauseJitter(t *testing.T) {
	fits := 0
	for range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		if store.TryAgainPause(ctx, 6) {
			fits++
		}
		cancel()
	}
	if fits == 0 {
		t.Fatal("none of 10 sixth pauses fitted 100 ms: none was shortened")
	}
}
