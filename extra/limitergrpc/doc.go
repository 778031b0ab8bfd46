// Package limitergrpc limits the calls of a gRPC server with unary and
// stream server interceptors that decide each call under the rules a
// rules.Limiter holds for its subject.
//
//	rl, err := rules.New(ctx, lim, rules.Static(set))
//	...
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(limitergrpc.UnaryServerInterceptor(rl)),
//		grpc.ChainStreamInterceptor(limitergrpc.StreamServerInterceptor(rl)))
//
// A denied call ends with codes.ResourceExhausted, a RetryInfo detail
// (when it can be retried) and a QuotaFailure detail naming the rule, and
// the response header metadata carries ratelimit-rule and retry-after
// (whole seconds). A Degraded denial (Redis down under FailClosed) ends
// with codes.Unavailable, as does a denial Redis made because the round
// trip was as long as the window (strategy.ErrStaleWindow: nothing
// counted), and a call that could not be decided with
// codes.Unavailable (Redis down or too slow under FailError; only the
// call's own end, its client gone or its deadline met, gives Canceled or
// DeadlineExceeded) or codes.InvalidArgument (no subject). A subject the
// rule set's Default denies gets codes.ResourceExhausted with no rule
// named and no RetryInfo; so does a call whose key was too contended to
// decide (limiter.ErrContention: a Degraded denial under FailOpen and
// FailClosed, the error under FailError), with a RetryInfo. The subject is the peer's IP address unless WithKey says
// otherwise; Join(Method(), PeerIP()) gives every method its own counters.
//
// It lives in a module of its own, so that the limiter module's users who
// do not use gRPC never download it.
package limitergrpc
