// Package httplimit is net/http middleware that rate-limits requests with a
// rule set (package rules) or fixed limits, and tells clients where they
// stand with the standard header fields.
//
// A KeyFunc derives each request's subject: the client IP (ClientIP, with
// trusted proxies for X-Forwarded-For), a header (Header, for an API or app
// key), several joined (Join, for an appkey-method, injectively), or any func of
// yours. The subject's rules are decided in one atomic call; an admitted
// request reaches the next handler, a denied one gets 429 Too Many Requests
// with a small application/problem+json body naming the violated rule (a
// denial no rule made, such as one Redis could not count in time,
// strategy.ErrStaleWindow, is 503 Service Unavailable).
//
// Every decided response carries, for the rules of its subject:
//
//	RateLimit-Policy: "qps";q=10;w=1, "qpd";q=1000;w=86400
//	RateLimit: "qps";r=3;t=1
//	X-RateLimit-Limit: 10
//	X-RateLimit-Remaining: 3
//	X-RateLimit-Reset: 1
//
// and a denied one Retry-After (seconds). RateLimit-Policy and RateLimit
// follow draft-ietf-httpapi-ratelimit-headers-11 (see WriteHeaders).
//
// When Redis cannot decide, the limiter's fail mode (or the rule set's)
// applies: FailOpen admits the request without rate limit fields (the
// numbers would not be real), FailClosed answers 503 Service Unavailable
// with Retry-After, and FailError hands the error to the error handler
// (503 by default; 429 naming no rule, as in the other modes, for a key
// too contended to decide, limiter.ErrContention).
package httplimit
