package goredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/redis/go-redis/v9"
)

// dialErrors remembers a client's last failure to connect. go-redis retries
// a dial that fails until the call's context ends, and then reports only
// the context's error: a call that met a refused connection or a bad
// certificate would say "context deadline exceeded" and nothing else. The
// adapter adds the remembered failure to such an error.
type dialErrors struct {
	last atomic.Pointer[dialFailure]
	// failed, when set, is told of each failed dial: a ClusterClient's
	// reloads its slot map (see dialErrorsOf).
	failed func()
}

type dialFailure struct {
	err error
	at  time.Time
}

// recentDial is how old a remembered dial failure may be to explain an
// error.
const recentDial = 30 * time.Second

// DialHook implements redis.Hook: it records each failed dial and forgets
// the failure once a dial succeeds.
func (d *dialErrors) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			d.last.Store(&dialFailure{err: err, at: time.Now()})
			if d.failed != nil {
				d.failed()
			}
		} else if d.last.Load() != nil {
			d.last.Store(nil)
		}
		return c, err
	}
}

// ProcessHook implements redis.Hook; it adds nothing.
func (d *dialErrors) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook implements redis.Hook; it adds nothing.
func (d *dialErrors) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// explain adds the last failure to connect to err, a deadline, a
// cancellation or a wait for a connection that ran out, when one happened
// recently and err does not already hold it.
func (d *dialErrors) explain(err error) error {
	if d == nil || err == nil {
		return err
	}
	var ne net.Error
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) &&
		!errors.Is(err, redis.ErrPoolTimeout) && !(errors.As(err, &ne) && ne.Timeout()) {
		return err
	}
	f := d.last.Load()
	if f == nil || time.Since(f.at) > recentDial || errors.Is(err, f.err) {
		return err
	}
	return fmt.Errorf("%w (the last attempt to connect, %s ago, failed: %w)", err, time.Since(f.at).Round(time.Millisecond), f.err)
}

// recorders holds the dialErrors of each client, so that many Stores on one
// client add one hook; an entry goes when its client is collected.
var recorders sync.Map // weak.Pointer[client type] → *dialErrors

// dialErrorsOf returns c's dialErrors, adding its hook to c the first time.
func dialErrorsOf(c redis.UniversalClient) *dialErrors {
	switch x := c.(type) {
	case *redis.Client:
		return recorderFor(x, func(d *dialErrors) { x.AddHook(d) })
	case *redis.ClusterClient:
		// A master that cannot be reached (killed, its host gone) sends
		// no MOVED, and go-redis reads the slot map again only after a
		// redirection or every ClusterStateReloadInterval (a minute by
		// default): its slots' calls would fail for up to that long after
		// a replica took over. A failed dial reloads the map (go-redis
		// runs one reload at a time, at least 200 ms apart).
		return recorderFor(x, func(d *dialErrors) {
			w := weak.Make(x) // d is kept per client: no reference back
			d.failed = func() {
				if cc := w.Value(); cc != nil {
					cc.ReloadState(context.Background())
				}
			}
			x.OnNewNode(func(n *redis.Client) { n.AddHook(d) })
		})
	case *redis.Ring:
		return recorderFor(x, func(d *dialErrors) { x.OnNewNode(func(n *redis.Client) { n.AddHook(d) }) })
	}
	return nil // another UniversalClient: errors are left as go-redis reports them
}

func recorderFor[T any](p *T, install func(*dialErrors)) *dialErrors {
	key := weak.Make(p)
	if d, ok := recorders.Load(key); ok {
		return d.(*dialErrors)
	}
	d := &dialErrors{}
	if actual, loaded := recorders.LoadOrStore(key, d); loaded {
		return actual.(*dialErrors)
	}
	install(d)
	runtime.AddCleanup(p, func(k weak.Pointer[T]) { recorders.Delete(k) }, key)
	return d
}
