package limitergrpc_test

import (
	"context"
	"fmt"
	"net"
	"strings"
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
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

func serveHealth(t *testing.T, addr string, mode limiter.FailMode, opts ...limitergrpc.Option) healthpb.HealthClient {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	lim, err := limiter.New(goredis.New(rdb), strategy.NewFixedWindow(), limiter.WithFailMode(mode), limiter.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	rl, err := rules.New(context.Background(), lim, rules.Static(&rules.Set{Default: rules.LimitUnknown(limiter.PerMinute(2).Named("per-minute"))}))
	if err != nil {
		t.Fatal(err)
	}
	return serveRules(t, rl, opts...)
}

// serveRules serves the health service behind a unary interceptor of rl
// on a loopback port, until t ends, and returns a client of it.
func serveRules(t *testing.T, rl *rules.Limiter, opts ...limitergrpc.Option) healthpb.HealthClient {
	t.Helper()
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(limitergrpc.UnaryServerInterceptor(rl, opts...)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
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

// TestEmptyKeyIsInvalidArgument: a call with no subject (a KeyFunc that
// returns "", or Join() of no parts) ends InvalidArgument, as doc.go says
// and as httplimit answers 400; it ended Unavailable, which tells clients
// to retry a call that can never succeed.
func TestEmptyKeyIsInvalidArgument(t *testing.T) {
	m := miniredis.RunT(t)
	empty := limitergrpc.WithKey(func(context.Context, string) (string, error) { return "", nil })
	client := serveHealth(t, m.Addr(), limiter.FailError, empty)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("empty subject: %v; want InvalidArgument (doc.go: \"codes.InvalidArgument (no subject)\")", err)
	}
	// Join() with no parts gives "" too.
	client = serveHealth(t, m.Addr(), limiter.FailError, limitergrpc.WithKey(limitergrpc.Join()))
	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("Join() subject: %v; want InvalidArgument", err)
	}
}

// TestDegradedNamesNoRule: under FailClosed with Redis down no rule
// refused the call (it ends Unavailable), so its header names none; it
// named the first rule, as if that had been exceeded.
func TestDegradedNamesNoRule(t *testing.T) {
	m := miniredis.RunT(t)
	client := serveHealth(t, m.Addr(), limiter.FailClosed)
	m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var header metadata.MD
	_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("FailClosed, Redis down: %v; want Unavailable", err)
	}
	if got := header.Get(limitergrpc.MetadataRule); len(got) != 0 {
		t.Errorf("Degraded denial (Redis down) carries %s=%q: no rule refused this call", limitergrpc.MetadataRule, got)
	}
}

// TestUnnamedRuleName: an unnamed rule is named as rules.RuleName and
// httplimit's headers name it ("per-1m" for 1/min), not "1/1m0s".
func TestUnnamedRuleName(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	lim, _ := limiter.New(goredis.New(rdb), strategy.NewFixedWindow())
	rl, err := rules.New(context.Background(), lim, rules.Static(&rules.Set{Default: rules.LimitUnknown(limiter.PerMinute(1))}))
	if err != nil {
		t.Fatal(err)
	}
	c := serveRules(t, rl)
	ctx := context.Background()
	_, _ = c.Check(ctx, &healthpb.HealthCheckRequest{})
	var header metadata.MD
	_, err = c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
	want := rules.RuleName(limiter.PerMinute(1))
	if got := header.Get(limitergrpc.MetadataRule); len(got) != 1 || got[0] != want {
		t.Errorf("%s = %q (status %v); want %q, the name rules.RuleName and httplimit give it", limitergrpc.MetadataRule, got, status.Convert(err).Message(), want)
	}
}

// contended is a strategy whose every decision fails on a key too
// contended to decide (limiter.ErrContention).
type contended struct{}

func (contended) Decide(context.Context, store.Store, limiter.Request) (limiter.Result, error) {
	return limiter.Result{}, fmt.Errorf("strategy: %w", limiter.ErrContention)
}

// TestContentionNamesNoRule: a call the limiter could not decide because
// its key was too contended is refused as rate limited (ResourceExhausted,
// as httplimit answers 429), in FailOpen and FailClosed, and under
// FailError (where the limiter returns limiter.ErrContention: it was
// Unavailable, though Redis had answered), with a RetryInfo; but no rule
// refused it: its header, message and details name none (they named the
// first rule, of which nothing was used).
func TestContentionNamesNoRule(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	for _, mode := range []limiter.FailMode{limiter.FailOpen, limiter.FailClosed, limiter.FailError} {
		lim, err := limiter.New(goredis.New(rdb), contended{}, limiter.WithFailMode(mode))
		if err != nil {
			t.Fatal(err)
		}
		rl, err := rules.New(context.Background(), lim, rules.Static(&rules.Set{Default: rules.LimitUnknown(limiter.PerDay(1000).Named("qpd"))}))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var header metadata.MD
		_, err = serveRules(t, rl).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
		cancel()
		st := status.Convert(err)
		if st.Code() != codes.ResourceExhausted {
			t.Errorf("%s, contention: %v; want ResourceExhausted", mode, err)
			continue
		}
		if got := header.Get(limitergrpc.MetadataRule); len(got) != 0 {
			t.Errorf("%s, contention: %s=%q; want none (no rule refused the call)", mode, limitergrpc.MetadataRule, got)
		}
		if strings.Contains(st.Message(), "qpd") {
			t.Errorf("%s, contention: message %q names the rule qpd, which did not refuse the call", mode, st.Message())
		}
		retry := false
		for _, d := range st.Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().AsDuration() == time.Second {
				retry = true
			}
			if q, ok := d.(*errdetails.QuotaFailure); ok {
				for _, v := range q.GetViolations() {
					if strings.Contains(v.GetDescription(), "qpd") {
						t.Errorf("%s, contention: QuotaFailure %q names the rule qpd, which did not refuse the call", mode, v.GetDescription())
					}
				}
			}
		}
		if !retry {
			t.Errorf("%s, contention: details %v; want a RetryInfo of 1s", mode, st.Details())
		}
		if got := header.Get(limitergrpc.MetadataRetryAfter); len(got) != 1 || got[0] != "1" {
			t.Errorf("%s, contention: %s=%q; want 1", mode, limitergrpc.MetadataRetryAfter, got)
		}
	}
}
