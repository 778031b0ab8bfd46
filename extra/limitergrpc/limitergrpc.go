package limitergrpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/internal/ctxend"
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/strategy"
)

// Metadata keys set on a denied call's response header.
const (
	// MetadataRule names the rule that refused the call.
	MetadataRule = "ratelimit-rule"
	// MetadataRetryAfter is the wait before a retry can succeed, in whole
	// seconds rounded up (absent when it never can).
	MetadataRetryAfter = "retry-after"
)

// ErrNoKey is a call from which a KeyFunc could not derive a subject.
var ErrNoKey = errors.New("limitergrpc: no key for the call")

// KeyFunc derives the subject of a call: the key its rules are counted
// under.
type KeyFunc func(ctx context.Context, fullMethod string) (string, error)

// PeerIP returns a KeyFunc keyed by the IP address of the call's peer.
func PeerIP() KeyFunc {
	return func(ctx context.Context, _ string) (string, error) {
		p, ok := peer.FromContext(ctx)
		if !ok || p.Addr == nil {
			return "", fmt.Errorf("%w: no peer", ErrNoKey)
		}
		s := p.Addr.String()
		if host, _, err := net.SplitHostPort(s); err == nil {
			s = host
		}
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return "", fmt.Errorf("%w: peer address %q", ErrNoKey, p.Addr.String())
		}
		return ip.Unmap().String(), nil
	}
}

// Method returns a KeyFunc keyed by the call's full method name
// ("/pkg.Service/Method").
func Method() KeyFunc {
	return func(_ context.Context, fullMethod string) (string, error) { return fullMethod, nil }
}

// MetadataKey returns a KeyFunc keyed by the first value of the incoming
// metadata key name (an API key header); a call without it is ErrNoKey.
func MetadataKey(name string) KeyFunc {
	name = strings.ToLower(name)
	return func(ctx context.Context, _ string) (string, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get(name); len(v) > 0 && v[0] != "" {
			return v[0], nil
		}
		return "", fmt.Errorf("%w: no %s metadata", ErrNoKey, name)
	}
}

// Join returns a KeyFunc that joins the keys of parts with "|", escaping
// "|" and "%" in each part, so distinct tuples never share a subject.
func Join(parts ...KeyFunc) KeyFunc {
	esc := strings.NewReplacer("%", "%25", "|", "%7C")
	return func(ctx context.Context, fullMethod string) (string, error) {
		keys := make([]string, len(parts))
		for i, p := range parts {
			k, err := p(ctx, fullMethod)
			if err != nil {
				return "", err
			}
			keys[i] = esc.Replace(k)
		}
		return strings.Join(keys, "|"), nil
	}
}

// Option configures the interceptors.
type Option func(*config)

type config struct {
	key KeyFunc
}

// WithKey sets how a call's subject is derived (default PeerIP()).
func WithKey(k KeyFunc) Option { return func(c *config) { c.key = k } }

func newConfig(opts []Option) config {
	c := config{key: PeerIP()}
	for _, o := range opts {
		o(&c)
	}
	if c.key == nil {
		c.key = PeerIP()
	}
	return c
}

// UnaryServerInterceptor returns an interceptor that decides each unary
// call under rl before its handler runs.
func UnaryServerInterceptor(rl *rules.Limiter, opts ...Option) grpc.UnaryServerInterceptor {
	c := newConfig(opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := c.decide(ctx, rl, info.FullMethod, func(md metadata.MD) error { return grpc.SetHeader(ctx, md) }); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor returns an interceptor that decides each stream
// under rl when it opens: one decision per stream, not per message.
func StreamServerInterceptor(rl *rules.Limiter, opts ...Option) grpc.StreamServerInterceptor {
	c := newConfig(opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if err := c.decide(ss.Context(), rl, info.FullMethod, ss.SetHeader); err != nil {
			return err
		}
		return handler(srv, ss)
	}
}

// decide decides one call and returns the status error that ends it, or
// nil when it is admitted.
func (c config) decide(ctx context.Context, rl *rules.Limiter, method string, setHeader func(metadata.MD) error) error {
	key, err := c.key(ctx, method)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	d, err := rl.Allow(ctx, key)
	if err != nil {
		if errors.Is(err, limiter.ErrInvalidKey) || errors.Is(err, limiter.ErrInvalidCost) {
			// the call names no subject the limiter takes (an empty
			// key): no retry can succeed
			return status.Error(codes.InvalidArgument, err.Error())
		}
		if err := ctxend.Err(ctx); err != nil {
			// the call's own end (the client gone, its deadline, which
			// a client's socket read may meet before ctx's timer fires);
			// the Limiter's own timeout on a slow Redis is an outage
			return status.FromContextError(err).Err()
		}
		if errors.Is(err, limiter.ErrContention) && len(d.Rules) > 0 {
			// FailError's form of the contended denial that FailOpen and
			// FailClosed make: the same answer
			d.Result = limiter.Result{Degraded: true, Cause: err, RetryAfter: min(d.Rules[0].Period, time.Second)}
			return denied(d, setHeader)
		}
		return status.Error(codes.Unavailable, "the rate limiter cannot decide")
	}
	if d.Allowed {
		return nil
	}
	return denied(d, setHeader)
}

// denied is the status of a denied call, with its details and header
// metadata.
func denied(d rules.Decision, setHeader func(metadata.MD) error) error {
	if len(d.Rules) == 0 {
		// the rule set's Default denies a subject without rules: no rule
		// was exceeded, and no wait helps
		st := status.New(codes.ResourceExhausted, "rate limit exceeded: no rule admits this caller")
		if withDetails, err := st.WithDetails(&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
			Subject: d.Subject, Description: "no rules for this subject: the rule set's default denies it",
		}}}); err == nil {
			st = withDetails
		}
		return st.Err()
	}
	if d.Degraded && !errors.Is(d.Cause, limiter.ErrContention) || errors.Is(d.Cause, strategy.ErrStaleWindow) {
		// FailClosed with Redis down, or a round trip as long as the
		// window (nothing counted): no rule refused the call
		return status.Error(codes.Unavailable, "the rate limiter cannot decide (reduced capacity)")
	}
	md := metadata.MD{}
	msg := "rate limit exceeded: too many concurrent calls for this subject to decide"
	quota := &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
		Subject:     d.Subject,
		Description: "too many concurrent calls for this subject to decide: no rule was exceeded",
	}}}
	if !d.Degraded {
		// a rule refused the call; a Degraded denial here is one of a key
		// too contended to decide (limiter.ErrContention), which no rule
		// made
		rule := rules.RuleName(d.Limit) // as HTTP headers name it
		md.Set(MetadataRule, rule)
		msg = fmt.Sprintf("rate limit exceeded: %s", rule)
		quota.Violations[0].Description = fmt.Sprintf("rule %s: %d per %s", rule, d.Limit.Rate, d.Limit.Period)
	}
	if d.RetryAfter > 0 {
		md.Set(MetadataRetryAfter, strconv.FormatInt(int64((d.RetryAfter+time.Second-1)/time.Second), 10))
	}
	if md.Len() > 0 {
		_ = setHeader(md) // fails only once headers were sent: nothing to do
	}
	st := status.New(codes.ResourceExhausted, msg)
	var withDetails *status.Status
	var err error
	if d.RetryAfter > 0 {
		withDetails, err = st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d.RetryAfter)}, quota)
	} else {
		withDetails, err = st.WithDetails(quota)
	}
	if err == nil {
		st = withDetails
	}
	return st.Err()
}
