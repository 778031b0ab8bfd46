package limitergrpc_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/extra/limitergrpc"
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/store/goredis"
	"github.com/quotagate/limiter/strategy"
)

// review5Rules returns a rules.Limiter of set on a miniredis of its own,
// and the miniredis.
func review5Rules(t *testing.T, set *rules.Set) (*rules.Limiter, *miniredis.Miniredis) {
	t.Helper()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	lim, err := limiter.New(goredis.New(rdb), strategy.NewFixedWindow())
	if err != nil {
		t.Fatal(err)
	}
	rl, err := rules.New(context.Background(), lim, rules.Static(set))
	if err != nil {
		t.Fatal(err)
	}
	return rl, m
}

func review5Peer(ip string) context.Context {
	return peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 1234}})
}

// TestPeerIPUnmapsIPv4MappedPeer: a dual-stack listener reports an IPv4
// client as ::ffff:a.b.c.d; PeerIP keys it by its IPv4 address, so the
// rules written for that address apply (and the client has one budget,
// however it connects).
func TestPeerIPUnmapsIPv4MappedPeer(t *testing.T) {
	// (a net.TCPAddr prints an IPv4-mapped IP as IPv4: the address as a
	// dual-stack listener's peer may report it, in its IPv6 form)
	mapped := peer.NewContext(context.Background(), &peer.Peer{Addr: strAddr("[::ffff:10.0.0.1]:1234")})
	if k, err := limitergrpc.PeerIP()(mapped, "/m"); err != nil || k != "10.0.0.1" {
		t.Errorf("PeerIP of [::ffff:10.0.0.1]:1234 = %q, %v; want 10.0.0.1", k, err)
	}
	rl, _ := review5Rules(t, &rules.Set{Subjects: map[string][]limiter.Limit{"10.0.0.1": {limiter.PerMinute(5).Named("partner")}}})
	ic := limitergrpc.UnaryServerInterceptor(rl)
	called := false
	_, err := ic(mapped, nil, &grpc.UnaryServerInfo{FullMethod: "/svc/M"}, func(context.Context, any) (any, error) { called = true; return "ok", nil })
	if err != nil || !called {
		t.Errorf("partner 10.0.0.1 over a dual-stack listener: %v (handler called %v); want admitted under its rule", err, called)
	}
}

type strAddr string

func (strAddr) Network() string  { return "tcp" }
func (a strAddr) String() string { return string(a) }

// TestMetadataKeyFirstNonEmptyValue: MetadataKey keys a call by the first
// value of its metadata key; an empty or missing one is ErrNoKey (so that
// clients without an API key do not share one subject).
func TestMetadataKeyFirstNonEmptyValue(t *testing.T) {
	k := limitergrpc.MetadataKey("X-API-Key")
	in := func(kv ...string) context.Context {
		return metadata.NewIncomingContext(context.Background(), metadata.Pairs(kv...))
	}
	if got, err := k(in("x-api-key", "a", "x-api-key", "b"), "/m"); err != nil || got != "a" {
		t.Errorf("two values a, b: %q, %v; want a (the first)", got, err)
	}
	for name, ctx := range map[string]context.Context{"empty value": in("x-api-key", ""), "missing": in("other", "v")} {
		if got, err := k(ctx, "/m"); !errors.Is(err, limitergrpc.ErrNoKey) {
			t.Errorf("%s: %q, %v; want ErrNoKey", name, got, err)
		}
		joined := limitergrpc.Join(limitergrpc.Method(), k)
		if got, err := joined(ctx, "/m"); !errors.Is(err, limitergrpc.ErrNoKey) {
			t.Errorf("Join(Method(), MetadataKey), %s: %q, %v; want ErrNoKey", name, got, err)
		}
	}
}

// TestKeyErrorIsInvalidArgument: a call from which the KeyFunc derives no
// subject ends InvalidArgument (no retry helps), before the handler and
// without touching Redis.
func TestKeyErrorIsInvalidArgument(t *testing.T) {
	rl, m := review5Rules(t, &rules.Set{Default: rules.LimitUnknown(limiter.PerMinute(5))})
	ic := limitergrpc.UnaryServerInterceptor(rl, limitergrpc.WithKey(limitergrpc.MetadataKey("x-api-key")))
	called := false
	_, err := ic(review5Peer("10.0.0.1"), nil, &grpc.UnaryServerInfo{FullMethod: "/svc/M"}, func(context.Context, any) (any, error) { called = true; return "ok", nil })
	if status.Code(err) != codes.InvalidArgument || called || len(m.Keys()) != 0 {
		t.Errorf("no x-api-key: %v, handler called %v, keys %q; want InvalidArgument, not called, no keys", err, called, m.Keys())
	}
}

// TestQuotaFailureNamesSubject: a rule's denial carries a QuotaFailure
// whose violation names the subject that was refused.
func TestQuotaFailureNamesSubject(t *testing.T) {
	rl, _ := review5Rules(t, &rules.Set{Default: rules.LimitUnknown(limiter.PerMinute(1).Named("rpm"))})
	ic := limitergrpc.UnaryServerInterceptor(rl)
	h := func(context.Context, any) (any, error) { return "ok", nil }
	info := &grpc.UnaryServerInfo{FullMethod: "/svc/M"}
	if _, err := ic(review5Peer("10.0.0.7"), nil, info, h); err != nil {
		t.Fatal(err)
	}
	_, err := ic(review5Peer("10.0.0.7"), nil, info, h)
	st := status.Convert(err)
	subject, found := "", false
	for _, d := range st.Details() {
		if q, ok := d.(*errdetails.QuotaFailure); ok && len(q.GetViolations()) == 1 {
			subject, found = q.GetViolations()[0].GetSubject(), true
		}
	}
	if st.Code() != codes.ResourceExhausted || !found || subject != "10.0.0.7" {
		t.Errorf("second call: %v, QuotaFailure found %v, subject %q; want ResourceExhausted naming 10.0.0.7", err, found, subject)
	}
}
