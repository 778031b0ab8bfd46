package limitertest_test

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/limitertest"
	"github.com/quotagate/limiter/strategy"
)

// TestWaitCanceledDoesNotMoveClock: New's Wait sleep moves the clock only
// for a context that has not ended: a Wait whose context ends during its
// try returns the context's error and leaves the test clock where it was
// (it moved by the denial's RetryAfter, an hour, as if Wait had slept).
func TestWaitCanceledDoesNotMoveClock(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	denials := 0
	obs := limiter.ObserverFuncs{Decision: func(_ context.Context, _ string, r limiter.Result) {
		if !r.Allowed {
			denials++
			cancel() // the context ends during Wait's try
		}
	}}
	lim, clock := limitertest.New(t, strategy.NewGCRA(), limiter.WithObserver(obs))
	l := limiter.Per(1, time.Hour)
	if r, err := lim.Allow(context.Background(), "u", l); err != nil || !r.Allowed {
		t.Fatal(r, err)
	}
	start := clock.Now()
	r, err := lim.Wait(ctx, "u", l)
	if !errors.Is(err, context.Canceled) || r.Allowed || denials != 1 {
		t.Fatalf("Wait = Allowed %v, %v after %d denials; want context.Canceled after 1", r.Allowed, err, denials)
	}
	if moved := clock.Now().Sub(start); moved != 0 {
		t.Errorf("a Wait canceled during its try moved the test clock by %s; want 0", moved)
	}
}

// TestServerClosedWithTest: the embedded server stops listening when the
// test that made it ends (it stayed up, a listener and its goroutines
// leaked per test).
func TestServerClosedWithTest(t *testing.T) {
	var addr string
	t.Run("inner", func(t *testing.T) {
		_, clock := limitertest.New(t, strategy.NewFixedWindow())
		addr = clock.Server().Addr()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("the server does not listen during the test: %v", err)
		}
		c.Close()
	})
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("the embedded server at %s still accepts connections after its test ended", addr)
	}
}

// fatalTB records Fatalf and ends its goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	mu    sync.Mutex
	fatal string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatal = format
	if len(args) > 0 {
		if err, ok := args[len(args)-1].(error); ok {
			f.fatal += " " + err.Error()
		}
	}
	f.mu.Unlock()
	runtime.Goexit()
}

// TestNewFailsTOnBadOption: an option limiter.New refuses fails the test
// through t.Fatalf, and New does not return (it returned a nil Limiter, to
// panic at its first use).
func TestNewFailsTOnBadOption(t *testing.T) {
	ft := &fatalTB{TB: t}
	returned := false
	done := make(chan struct{})
	go func() {
		defer close(done)
		lim, _ := limitertest.New(ft, strategy.NewFixedWindow(), limiter.WithSleep(nil))
		returned = true
		_ = lim
	}()
	<-done
	if returned || !strings.Contains(ft.fatal, "limitertest:") || !strings.Contains(ft.fatal, "nil sleep") {
		t.Errorf("New with a nil sleep function: returned %v, Fatalf %q; want Fatalf naming the option and no return", returned, ft.fatal)
	}
}
