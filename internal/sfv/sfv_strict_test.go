package sfv

import "testing"

// TestParseStrictBytesAndDecimals: a String holds printable ASCII only (a
// UTF-8 policy name must not pass), and a Decimal has at most three
// fractional digits (RFC 9651 sections 3.3.3 and 3.3.2).
func TestParseStrictBytesAndDecimals(t *testing.T) {
	for _, v := range []string{"\"caf\xc3\xa9\";q=1", "\"x\x7f\";q=1", `"x";q=1;acme=1.2345`} {
		if p, err := ParsePolicy(v); err == nil {
			t.Errorf("ParsePolicy(%q) accepted: %+v", v, p)
		}
	}
	for _, v := range []string{`"x";q=1;acme=1.234`, `"x~ !";q=1;acme=-123456789012.1`} {
		if _, err := ParsePolicy(v); err != nil {
			t.Errorf("ParsePolicy(%q): %v", v, err)
		}
	}
}
