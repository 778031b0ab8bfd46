package httplimit

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/strategy"
)

// Header names written by WriteHeaders.
const (
	// HeaderPolicy lists the quota policies (rules) of the subject.
	HeaderPolicy = "RateLimit-Policy"
	// HeaderRateLimit is the service limit of the binding rule.
	HeaderRateLimit = "RateLimit"
	// HeaderLimit is the binding rule's quota, for pre-draft clients.
	HeaderLimit = "X-RateLimit-Limit"
	// HeaderRemaining is the binding rule's remaining quota.
	HeaderRemaining = "X-RateLimit-Remaining"
	// HeaderReset is the seconds until the binding rule's window resets.
	HeaderReset = "X-RateLimit-Reset"
	// HeaderRetry is the seconds until a denied request may succeed.
	HeaderRetry = "Retry-After"
)

// maxSFInteger is the largest Integer of HTTP Structured Fields (RFC 9651:
// at most 15 digits); larger quotas are advertised as this.
const maxSFInteger = 999_999_999_999_999

// WriteHeaders sets the rate limit fields of a decision on h:
//
//	RateLimit-Policy: "qps";q=10;w=1, "qpd";q=1000;w=86400
//	RateLimit: "qps";r=3;t=1
//	X-RateLimit-Limit: 10
//	X-RateLimit-Remaining: 3
//	X-RateLimit-Reset: 1
//	Retry-After: 1
//
// RateLimit-Policy and RateLimit follow draft-ietf-httpapi-ratelimit-headers-11
// (Structured Fields Lists, RFC 9651): one quota policy item per rule of the
// decision, named by its rule name (rules.RuleName) as a String, with its
// quota q and, for a period of whole seconds, its window w in seconds (the
// draft has no sub-second windows, so w is left out for those); and one
// service limit item for the binding rule (the one that refused the
// request, or the one with the least quota left, and of those the one
// whose window resets last) with its remaining quota r
// and the seconds until more quota is made available, t: for a denied
// request the Retry-After (both name the same point in time, as the draft
// asks), otherwise the seconds until the binding rule's window resets (for
// GCRA and TokenBucket, until the bucket is full again). The X-RateLimit-*
// fields carry the binding rule's limit, remaining quota and t (a delta,
// not a timestamp), for clients that predate the draft.
// The remaining quota is advertised up to the binding rule's quota, its
// Rate: a burst above the Rate (GCRA and TokenBucket with a Burst larger
// than the Rate) shows as the Rate until less than that is left, so that
// r never exceeds q nor X-RateLimit-Remaining X-RateLimit-Limit.
// Retry-After, in whole seconds rounded up, is set on denied decisions that
// can succeed later.
//
// Nothing is written for a decision without rules (a Default that allows or
// denies) or a Degraded one, whose numbers do not come from Redis; only
// Retry-After, for a Degraded denial. legacy false leaves out X-RateLimit-*.
func WriteHeaders(h http.Header, d rules.Decision, legacy bool) {
	retry := !d.Allowed && d.RetryAfter > 0 // a denial that can succeed later
	if retry {
		h.Set(HeaderRetry, strconv.FormatInt(ceilSeconds(d.RetryAfter), 10))
	}
	if d.Degraded || len(d.Rules) == 0 {
		return
	}
	var b strings.Builder
	for i, l := range d.Rules {
		if i > 0 {
			b.WriteString(", ")
		}
		writeString(&b, rules.RuleName(l))
		b.WriteString(";q=")
		b.WriteString(strconv.FormatInt(min(l.Rate, maxSFInteger), 10))
		if l.Period >= time.Second && l.Period%time.Second == 0 {
			b.WriteString(";w=")
			b.WriteString(strconv.FormatInt(int64(l.Period/time.Second), 10))
		}
	}
	h.Set(HeaderPolicy, b.String())

	bind := d.Limit
	remaining := strconv.FormatInt(min(max(d.Remaining, 0), bind.Rate, maxSFInteger), 10)
	resetAfter := d.ResetAfter // t: until more quota is available
	if retry {
		resetAfter = d.RetryAfter // as Retry-After says
	}
	reset := strconv.FormatInt(ceilSeconds(resetAfter), 10)
	b.Reset()
	writeString(&b, rules.RuleName(bind))
	b.WriteString(";r=")
	b.WriteString(remaining)
	b.WriteString(";t=")
	b.WriteString(reset)
	h.Set(HeaderRateLimit, b.String())

	if legacy {
		h.Set(HeaderLimit, strconv.FormatInt(bind.Rate, 10))
		h.Set(HeaderRemaining, remaining)
		h.Set(HeaderReset, reset)
	}
}

// writeString writes s as a Structured Fields String: printable ASCII
// between quotes, with '"' and '\' escaped; any other byte becomes '?'.
// (rules.Set.Validate already keeps names to visible ASCII.)
func writeString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}

// ceilSeconds rounds d up to whole seconds; negative durations are 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// violated names the rule of a denial, for the problem body: none for a
// Degraded one (a key too contended to decide, limiter.ErrContention) or
// one that could not be counted in time (strategy.ErrStaleWindow), which
// no rule made.
func violated(d rules.Decision) []string {
	if d.Degraded || len(d.Rules) == 0 || d.Limit == (limiter.Limit{}) || errors.Is(d.Cause, strategy.ErrStaleWindow) {
		return []string{}
	}
	return []string{rules.RuleName(d.Limit)}
}
