package goredis_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// TestDialCauseKeptThenForgotten: a call whose context ends while
// go-redis keeps retrying a refused dial reports the deadline with the
// refused dial in its chain (and not store.ErrUnknownOutcome); once a dial
// succeeds the failure is forgotten: a later call that times out on a
// silent server does not blame the old refused dial.
func TestDialCauseKeptThenForgotten(t *testing.T) {
	for _, ctxTimeouts := range []bool{true, false} {
		t.Run(map[bool]string{true: "ContextTimeoutEnabled", false: "adapterBounds"}[ctxTimeouts], func(t *testing.T) {
			m := redistest.NewMini(t)
			p := redistest.NewProxy(t, m.Addr())
			var refuse atomic.Bool
			refuse.Store(true)
			var nd net.Dialer
			rdb := redis.NewClient(&redis.Options{
				Addr: p.Addr(), MaxRetries: -1, ContextTimeoutEnabled: ctxTimeouts,
				DialerRetries: 1 << 20, // go-redis retries the dial until the call's context ends
				Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
					if refuse.Load() {
						return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
					}
					return nd.DialContext(ctx, network, addr)
				},
			})
			t.Cleanup(func() { _ = rdb.Close() })
			st := goredis.New(rdb)

			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			_, err := st.Eval(ctx, incr, []string{"k"}, nil)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, store.ErrUnknownOutcome) {
				t.Fatalf("call while every dial is refused = %v; want context.DeadlineExceeded with syscall.ECONNREFUSED in its chain, not store.ErrUnknownOutcome", err)
			}

			refuse.Store(false)
			waitFor(t, "the store to serve once dials succeed", func() bool {
				c, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_, err := st.Eval(c, incr, []string{"k"}, nil)
				return err == nil
			})

			p.Blackhole(true)
			ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
			_, err = st.Eval(ctx, incr, []string{"k"}, nil)
			cancel()
			p.Blackhole(false)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("call on a silent server = %v; want context.DeadlineExceeded", err)
			}
			if errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("call on a silent server after a successful dial = %v; it blames a refused dial that a later dial outdated", err)
			}
		})
	}
}

// TestTLSDialerUsesTheNetDialer: TLSDialer connects through the
// net.Dialer it is given (its connect timeout, keep-alive, Control), not
// a default one: nd's Control sees the connection.
func TestTLSDialerUsesTheNetDialer(t *testing.T) {
	s := redistest.StartTLSServer(t)
	var controlled atomic.Int32
	nd := &net.Dialer{Timeout: time.Second, Control: func(string, string, syscall.RawConn) error {
		controlled.Add(1)
		return nil
	}}
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, Dialer: goredis.TLSDialer(nd, s.TLS().ClientConfig())})
	t.Cleanup(func() { _ = rdb.Close() })
	st := goredis.New(rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if v, err := st.Eval(ctx, incr, []string{"k"}, nil); err != nil || v != int64(1) {
		t.Fatalf("Eval over TLS = %v, %v; want 1", v, err)
	}
	if n := controlled.Load(); n == 0 {
		t.Errorf("the net.Dialer given to TLSDialer dialled no connection (its Control ran %d times): its settings are ignored", n)
	}
}

// TestSharedPipelinesOption: WithSharedPipelines(n) sets how many
// round trips go out before calls share them: with 0 a call never waits
// behind calls in flight (it goes alone at once), with 1 the second
// concurrent call waits to share.
func TestSharedPipelinesOption(t *testing.T) {
	h := &roundTrips{}
	_, rdb, sha := sharingSetup(t, h, true)
	off := goredis.New(rdb, goredis.WithSharedPipelines(0))
	wait := holdSlots(t, off, h, sha) // 2 calls in flight, held in the hook
	done := make(chan error, 1)
	go func() {
		_, err := off.EvalSha(context.Background(), sha, []string{"k"}, nil)
		done <- err
	}()
	for ended := false; !ended; {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("third call with sharing off: %v", err)
			}
			ended = true
		default:
			if q := goredis.Queued(off); q != 0 {
				close(h.release)
				wait()
				<-done
				t.Fatalf("WithSharedPipelines(0): a call waits to share a pipeline (%d queued) behind 2 in flight; want it sent at once", q)
			}
			time.Sleep(time.Millisecond)
		}
	}
	close(h.release)
	wait()

	h.release = make(chan struct{})
	h.held.Store(0)
	one := goredis.New(rdb, goredis.WithSharedPipelines(1))
	held := make(chan error, 1)
	go func() {
		_, err := one.EvalSha(context.Background(), sha, []string{"held"}, nil)
		held <- err
	}()
	waitFor(t, "1 held call in the hook", func() bool { return h.held.Load() == 1 })
	go func() {
		_, err := one.EvalSha(context.Background(), sha, []string{"k"}, nil)
		done <- err
	}()
	for queued := false; !queued; {
		select {
		case err := <-done:
			close(h.release)
			<-held
			t.Fatalf("WithSharedPipelines(1): a second call (%v) went out beside the one in flight; want it queued", err)
		default:
			queued = goredis.Queued(one) == 1
			time.Sleep(time.Millisecond)
		}
	}
	close(h.release)
	if err := <-held; err != nil {
		t.Error(err)
	}
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// TestClusterKeylessScript: a script call without keys on a
// ClusterClient (sharing on, the default) is answered, not a panic.
func TestClusterKeylessScript(t *testing.T) {
	c := redistest.StartCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	st := goredis.New(rdb)
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("a keyless script call on a ClusterClient panicked: %v", r)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if v, err := st.Eval(ctx, "return 7", nil, nil); err != nil || v != int64(7) {
		t.Fatalf("keyless Eval on a ClusterClient = %v, %v; want 7", v, err)
	}
}

// TestQueuedCallKeepsDialCause: a call that gave up while queued
// behind calls stuck dialing a server that refuses connections reports
// the refused dial in its error (not only the deadline), and not
// store.ErrUnknownOutcome.
func TestQueuedCallKeepsDialCause(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{
		Addr: redistest.RefusedAddr(t), MaxRetries: -1, ContextTimeoutEnabled: true,
		DialerRetries: 1 << 20,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
		},
	})
	t.Cleanup(func() { _ = rdb.Close() })
	st := goredis.New(rdb)
	long := make(chan error, 2)
	for range 2 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_, err := st.Eval(ctx, incr, []string{"k"}, nil)
			long <- err
		}()
	}
	waitFor(t, "both slots taken", func() bool { return goredis.InFlight(st) == 2 })
	short := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := st.Eval(ctx, incr, []string{"k"}, nil)
		short <- err
	}()
	waitFor(t, "the third call queued", func() bool { return goredis.Queued(st) == 1 })
	err := <-short
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, store.ErrUnknownOutcome) {
		t.Errorf("queued call given up while dials are refused = %v; want context.DeadlineExceeded with syscall.ECONNREFUSED in its chain, not store.ErrUnknownOutcome", err)
	}
	<-long
	<-long
}
