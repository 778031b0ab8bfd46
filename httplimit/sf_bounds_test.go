package httplimit_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/httplimit"
	"github.com/quotagate/limiter/rules"
)

// TestWriteHeadersSFBounds: r stays an RFC 9651 Integer (at most 15 digits)
// for a rule of limiter.MaxRate with most of it left, and a visible-ASCII
// name ('~' included) is written as it is.
func TestWriteHeadersSFBounds(t *testing.T) {
	l := limiter.Limit{Rate: limiter.MaxRate, Period: time.Hour, Name: "big~1"}
	d := rules.Decision{Result: limiter.Result{Allowed: true, Remaining: limiter.MaxRate - 1, ResetAfter: time.Second, Limit: l}, Rules: []limiter.Limit{l}}
	h := http.Header{}
	httplimit.WriteHeaders(h, d, false)
	if got, want := h.Get(httplimit.HeaderRateLimit), `"big~1";r=999999999999999;t=1`; got != want {
		t.Errorf("RateLimit = %q; want %q", got, want)
	}
	if got, want := h.Get(httplimit.HeaderPolicy), `"big~1";q=999999999999999;w=3600`; got != want {
		t.Errorf("RateLimit-Policy = %q; want %q", got, want)
	}
}
