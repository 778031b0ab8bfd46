package httplimit_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/httplimit"
	"github.com/quotagate/limiter/rules"
)

// TestWriteHeadersNonASCIIName: a rule name outside printable ASCII (a
// Limit named by the caller of the exported WriteHeaders) is written as a
// valid Structured Fields String, each other byte as '?' (writeString's doc),
// never raw, and r is never negative.
func TestWriteHeadersNonASCIIName(t *testing.T) {
	l := limiter.Limit{Rate: 10, Period: time.Second, Name: "qps\xffé"}
	d := rules.Decision{Result: limiter.Result{Allowed: true, Remaining: -3, ResetAfter: time.Second, Limit: l}, Rules: []limiter.Limit{l}}
	h := http.Header{}
	httplimit.WriteHeaders(h, d, true)
	for _, f := range []string{httplimit.HeaderPolicy, httplimit.HeaderRateLimit} {
		v := h.Get(f)
		for i := 0; i < len(v); i++ {
			if v[i] < 0x20 || v[i] > 0x7e {
				t.Errorf("%s: %q has byte %#x outside printable ASCII (not a valid sf-string)", f, v, v[i])
				break
			}
		}
	}
	if got, want := h.Get(httplimit.HeaderRateLimit), `"qps???";r=0;t=1`; got != want {
		t.Errorf("RateLimit = %q; want %q", got, want)
	}
	if got := h.Get(httplimit.HeaderRemaining); got != "0" {
		t.Errorf("X-RateLimit-Remaining = %q; want 0", got)
	}
}
