package rules_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/rules"
)

// heldSource is a Source whose loads, once hold is set, block until
// release is closed or their context ends; started gets a value as each
// such load begins.
type heldSource struct {
	set     *rules.Set
	hold    atomic.Bool
	started chan struct{}
	release chan struct{}
}

func (s *heldSource) Load(ctx context.Context) (*rules.Set, error) {
	if !s.hold.Load() {
		return s.set, nil
	}
	s.started <- struct{}{}
	select {
	case <-s.release:
		return s.set, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// hangReload starts a Reload of rl whose load hangs until src.release is
// closed, and returns once the load has begun, with the channel that gets
// the Reload's error. A load still held when t ends is released then.
func hangReload(t *testing.T, rl *rules.Limiter, src *heldSource) <-chan error {
	t.Helper()
	t.Cleanup(func() {
		select {
		case <-src.release:
		default:
			close(src.release)
		}
	})
	src.hold.Store(true)
	hung := make(chan error, 1)
	go func() {
		_, err := rl.Reload(context.Background())
		hung <- err
	}()
	select {
	case <-src.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the first Reload never called Load")
	}
	return hung
}

// TestReloadWaitingForAnotherLoadEndsWithItsContext: loads run one at a
// time, but a caller waiting for its turn is bounded by its own context.
// While one Reload's load hangs (a slow Redis, a source without a
// deadline), a Reload with a 100 ms deadline returns its context's error
// by then, leaving LastError as it was, and a Watch whose context is
// cancelled returns at once; after the hung load ends, loads go on.
func TestReloadWaitingForAnotherLoadEndsWithItsContext(t *testing.T) {
	m := redistest.NewMini(t)
	b := newBackend(t, m.Addr(), m)
	src := &heldSource{
		set:     &rules.Set{Subjects: map[string][]limiter.Limit{"a": {qps}}},
		started: make(chan struct{}, 8),
		release: make(chan struct{}),
	}
	rl, err := rules.New(context.Background(), newLimiter(t, b.st), src, rules.WithInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			close(src.release)
		}
	}
	defer release()
	hung := hangReload(t, rl, src)

	// (a busy machine's scheduling: well above 100 ms, far below a load
	// that never ends)
	const slack = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	type reloaded struct {
		changed bool
		err     error
	}
	bounded := make(chan reloaded, 1)
	start := time.Now()
	go func() {
		changed, err := rl.Reload(ctx)
		bounded <- reloaded{changed, err}
	}()
	select {
	case r := <-bounded:
		if took := time.Since(start); r.changed || !errors.Is(r.err, context.DeadlineExceeded) {
			t.Errorf("Reload with a 100 ms deadline, another load running = %v, %v after %v; want false, context.DeadlineExceeded", r.changed, r.err, took)
		}
	case <-time.After(100*time.Millisecond + slack):
		t.Errorf("Reload with a 100 ms deadline, another load running, has not returned after %v; want its context's error by its deadline", time.Since(start))
		release()
		<-bounded
	}
	if err := rl.LastError(); err != nil {
		t.Errorf("LastError after a Reload that loaded nothing = %v; want nil (the last load succeeded)", err)
	}

	wctx, wcancel := context.WithCancel(context.Background())
	watched := make(chan error, 1)
	go func() { watched <- rl.Watch(wctx) }()
	time.Sleep(100 * time.Millisecond) // Watch ticks and waits for its turn
	wcancel()
	start = time.Now()
	select {
	case err := <-watched:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Watch cancelled = %v; want context.Canceled", err)
		}
	case <-time.After(slack):
		t.Errorf("Watch, cancelled while another load runs, has not returned after %v", time.Since(start))
		release()
		<-watched
	}

	release()
	if err := <-hung; err != nil {
		t.Fatalf("the hung Reload, released = %v", err)
	}
	src.hold.Store(false)
	src.set = &rules.Set{Subjects: map[string][]limiter.Limit{"b": {qps}}}
	if changed, err := rl.Reload(context.Background()); !changed || err != nil {
		t.Errorf("Reload after the hung load ended = %v, %v; want true, nil", changed, err)
	}
}

// TestConfigErrorWithoutErr: a ConfigError made without an Err (its
// fields are exported) prints the parts it has and is ErrInvalidConfig.
func TestConfigErrorWithoutErr(t *testing.T) {
	for _, tc := range []struct {
		err  *rules.ConfigError
		want string
	}{
		{&rules.ConfigError{Field: "default"}, "rules: invalid config: default"},
		{&rules.ConfigError{}, "rules: invalid config"},
		{&rules.ConfigError{Source: "rules.yaml", Field: "fail_mode", Err: errors.New("bad")}, "rules: invalid config: rules.yaml: fail_mode: bad"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%#v.Error() = %q; want %q", tc.err, got, tc.want)
		}
		if !errors.Is(tc.err, rules.ErrInvalidConfig) {
			t.Errorf("%#v is not ErrInvalidConfig", tc.err)
		}
	}
}

// TestWatchSkipsTickWhileAnotherLoadRuns: a Watch tick that waits out its
// bound (a second) for another load, a Reload whose load hangs, loaded
// nothing and failed nothing: the reload hook is told nothing, and
// LastError stays nil.
func TestWatchSkipsTickWhileAnotherLoadRuns(t *testing.T) {
	m := redistest.NewMini(t)
	b := newBackend(t, m.Addr(), m)
	src := &heldSource{
		set:     &rules.Set{Subjects: map[string][]limiter.Limit{"a": {qps}}},
		started: make(chan struct{}, 8),
		release: make(chan struct{}),
	}
	hooked := make(chan error, 16)
	rl, err := rules.New(context.Background(), newLimiter(t, b.st), src, rules.WithInterval(20*time.Millisecond),
		rules.WithReloadHook(func(err error) { hooked <- err }))
	if err != nil {
		t.Fatal(err)
	}
	hung := hangReload(t, rl, src)
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan error, 1)
	go func() { watched <- rl.Watch(ctx) }()
	defer func() {
		cancel()
		<-watched
	}()
	// Watch's ticks wait a second each for the hung load: two and a half
	// seconds see at least one give up
	select {
	case err := <-hooked:
		t.Errorf("the reload hook was told %v while another load ran; want nothing (the tick loaded nothing)", err)
	case <-time.After(2500 * time.Millisecond):
	}
	close(src.release)
	if err := <-hung; err != nil {
		t.Fatalf("the hung Reload, released = %v", err)
	}
	if err := rl.LastError(); err != nil {
		t.Errorf("LastError = %v; want nil (no load failed)", err)
	}
}
