package limitergrpc_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/extra/limitergrpc"
	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/internal/storetest"
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// serve starts a gRPC server with the health service behind both
// interceptors, on a loopback listener, deciding with a limiter on m, and
// returns a client of it.
func serve(t *testing.T, m *miniredis.Miniredis, mode limiter.FailMode, limits ...limiter.Limit) healthpb.HealthClient {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	lim, err := limiter.New(goredis.New(rdb), strategy.NewFixedWindow(), limiter.WithFailMode(mode), limiter.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return serveWith(t, lim, limits...)
}

// serveWith is serve deciding with lim.
func serveWith(t *testing.T, lim *limiter.Limiter, limits ...limiter.Limit) healthpb.HealthClient {
	t.Helper()
	rl, err := rules.New(context.Background(), lim, rules.Static(&rules.Set{Default: rules.LimitUnknown(limits...)}))
	if err != nil {
		t.Fatal(err)
	}
	key := limitergrpc.WithKey(limitergrpc.Join(limitergrpc.Method(), limitergrpc.PeerIP()))
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(limitergrpc.UnaryServerInterceptor(rl, key)),
		grpc.ChainStreamInterceptor(limitergrpc.StreamServerInterceptor(rl, key)))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// TestInterceptors: 2 calls a minute per method and peer. The third unary
// call ends with ResourceExhausted, a RetryInfo of the window's rest, a
// QuotaFailure and the rule in the header metadata; streams count apart
// from the unary method and are decided when they open.
func TestInterceptors(t *testing.T) {
	m := miniredis.RunT(t)
	client := serve(t, m, limiter.FailError, limiter.PerMinute(2).Named("per-minute"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 2 {
		if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	var header metadata.MD
	_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("third call: %v; want ResourceExhausted", err)
	}
	var retry *errdetails.RetryInfo
	var quota *errdetails.QuotaFailure
	for _, d := range st.Details() {
		switch v := d.(type) {
		case *errdetails.RetryInfo:
			retry = v
		case *errdetails.QuotaFailure:
			quota = v
		}
	}
	if retry == nil || retry.RetryDelay.AsDuration() <= 0 || retry.RetryDelay.AsDuration() > time.Minute {
		t.Errorf("RetryInfo %v; want a delay in (0, 1m]", retry)
	}
	if quota == nil || len(quota.Violations) != 1 || quota.Violations[0].Description != "rule per-minute: 2 per 1m0s" {
		t.Errorf("QuotaFailure %v; want the rule per-minute", quota)
	}
	if got := header.Get(limitergrpc.MetadataRule); len(got) != 1 || got[0] != "per-minute" {
		t.Errorf("header %s = %q, want per-minute", limitergrpc.MetadataRule, got)
	}
	if got := header.Get(limitergrpc.MetadataRetryAfter); len(got) != 1 {
		t.Errorf("header %s = %q, want one value", limitergrpc.MetadataRetryAfter, got)
	} else if s, err := strconv.Atoi(got[0]); err != nil || s < 1 || s > 60 {
		t.Errorf("header %s = %q, want whole seconds in [1, 60]", limitergrpc.MetadataRetryAfter, got[0])
	}

	// Streams: their own method, their own count.
	for i := range 3 {
		stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = stream.Recv()
		if i < 2 && err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		if i == 2 && status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("third stream: %v; want ResourceExhausted", err)
		}
	}
}

// TestUnavailable: with Redis gone a call that cannot be decided ends with
// Unavailable under FailError and under FailClosed, and goes through under
// FailOpen.
func TestUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		mode limiter.FailMode
		want codes.Code
	}{{limiter.FailError, codes.Unavailable}, {limiter.FailClosed, codes.Unavailable}, {limiter.FailOpen, codes.OK}} {
		m := miniredis.RunT(t)
		client := serve(t, m, tc.mode, limiter.PerMinute(2))
		m.Close()
		if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != tc.want {
			t.Errorf("%s with Redis down: %v; want %s", tc.mode, err, tc.want)
		}
	}
}

// TestStaleWindowDenialIsUnavailable: a denial Redis made because the
// round trip was as long as the window (Bucketed, whose every command
// reaches the server a window late: strategy.ErrStaleWindow), counting
// nothing, is not a rule's refusal: codes.Unavailable, naming no rule.
func TestStaleWindowDenialIsUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := redistest.NewMini(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	var causes []error
	var mu sync.Mutex
	lim, err := limiter.New(storetest.Moving(goredis.New(rdb), m.Advance, time.Second), strategy.NewBucketed(strategy.WithClock(m.Now)),
		limiter.WithObserver(limiter.ObserverFuncs{Decision: func(_ context.Context, _ string, r limiter.Result) {
			mu.Lock()
			defer mu.Unlock()
			causes = append(causes, r.Cause)
		}}))
	if err != nil {
		t.Fatal(err)
	}
	client := serveWith(t, lim, limiter.Limit{Rate: 3, Period: time.Second, Name: "qps"})
	for i := range 3 {
		var md metadata.MD
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&md))
		mu.Lock()
		premise := len(causes) == i+1 && errors.Is(causes[i], strategy.ErrStaleWindow)
		mu.Unlock()
		if !premise {
			t.Fatalf("call %d: %v, causes %v; want a denial whose Cause is ErrStaleWindow (the test's premise)", i, err, causes)
		}
		if status.Code(err) != codes.Unavailable || len(md.Get(limitergrpc.MetadataRule)) != 0 {
			t.Errorf("call %d: %v, rule %q; want Unavailable, no rule named", i, err, md.Get(limitergrpc.MetadataRule))
		}
	}
}
