package limiter_test

import (
	"errors"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/strategy"
)

// TestNilOption: a nil Option (one chosen conditionally and left unset) is
// ErrInvalidOption in New, With and NewConcurrency, not a panic.
func TestNilOption(t *testing.T) {
	_, st := newMini(t)
	var opt limiter.Option
	try := func(what string, f func() error) {
		t.Helper()
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s with a nil option panicked: %v; want ErrInvalidOption", what, p)
					err = limiter.ErrInvalidOption
				}
			}()
			err = f()
		}()
		if !errors.Is(err, limiter.ErrInvalidOption) {
			t.Errorf("%s with a nil option = %v; want ErrInvalidOption", what, err)
		}
	}
	try("New", func() error {
		_, err := limiter.New(st, strategy.NewFixedWindow(), limiter.WithPrefix("p"), opt)
		return err
	})
	lim := newLimiter(t, st)
	try("With", func() error { _, err := lim.With(opt); return err })
	try("NewConcurrency", func() error { _, err := limiter.NewConcurrency(st, strategy.NewConcurrency(), opt); return err })
	// The strategies' options cannot fail: a nil one is skipped.
	strategy.NewAlignedWindow(nil)
	strategy.NewBucketed(nil)
	strategy.NewOptimistic(nil)
}

// TestWithClockOnASharedCache: a copy shares its original's deny cache and
// quota leases, which keep the original's clock; With may not set another.
func TestWithClockOnASharedCache(t *testing.T) {
	_, st := newMini(t)
	lim := newLimiter(t, st, limiter.WithDenyCache(16))
	_, err := lim.With(limiter.WithClock(func() time.Time { return time.Unix(0, 0) }))
	if !errors.Is(err, limiter.ErrInvalidOption) {
		t.Errorf("With(WithClock) on a Limiter with a deny cache = %v; want ErrInvalidOption", err)
	}
	// A copy that makes its own cache takes the clock.
	if _, err := lim.With(limiter.WithClock(time.Now), limiter.WithDenyCache(16)); err != nil {
		t.Errorf("With(WithClock, WithDenyCache): %v", err)
	}
	// Without a cache or leases, a copy may have its own clock.
	plain := newLimiter(t, st)
	if _, err := plain.With(limiter.WithClock(time.Now)); err != nil {
		t.Errorf("With(WithClock) on a Limiter without a cache: %v", err)
	}
}
