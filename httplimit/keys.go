package httplimit

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ErrNoKey is a request from which a KeyFunc could not derive a key (a
// missing header, an unparsable client address). The Middleware answers
// it with 400 Bad Request unless WithErrorHandler says otherwise.
var ErrNoKey = errors.New("httplimit: no rate limit key in the request")

// KeyFunc derives the subject of a request: the key its limits are counted
// under, and under which a rule set looks up its rules. Any func of this
// type is a key extractor; an error wrapping ErrNoKey means the request
// carries none.
type KeyFunc func(r *http.Request) (string, error)

// ClientIP returns a KeyFunc keyed by the client's IP address.
//
// Without trusted proxies the client is the peer of the connection
// (Request.RemoteAddr), and X-Forwarded-For is ignored: any client can
// write it. When the peer is in a trusted prefix (your load balancers),
// X-Forwarded-For is read from right to left, skipping the addresses of
// trusted proxies; the first untrusted address is the client. An entry
// that does not parse as an IP address is an error (ErrNoKey). IPv4-mapped
// IPv6 addresses are keyed as IPv4; zones are dropped.
func ClientIP(trusted ...netip.Prefix) KeyFunc {
	ps := make([]netip.Prefix, len(trusted))
	for i, p := range trusted {
		ps[i] = p.Masked()
	}
	isTrusted := func(a netip.Addr) bool {
		for _, p := range ps {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	return func(r *http.Request) (string, error) {
		host := r.RemoteAddr
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		addr, err := parseIP(host)
		if err != nil {
			return "", fmt.Errorf("%w: remote address %q", ErrNoKey, r.RemoteAddr)
		}
		if !isTrusted(addr) {
			return addr.String(), nil
		}
		hops := forwardedFor(r.Header)
		for i := len(hops) - 1; i >= 0; i-- {
			a, err := parseIP(hops[i])
			if err != nil {
				return "", fmt.Errorf("%w: X-Forwarded-For entry %q", ErrNoKey, hops[i])
			}
			addr = a
			if !isTrusted(a) {
				break
			}
		}
		return addr.String(), nil
	}
}

func parseIP(s string) (netip.Addr, error) {
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, err
	}
	return a.Unmap().WithZone(""), nil
}

// forwardedFor returns the entries of every X-Forwarded-For field, in
// order.
func forwardedFor(h http.Header) []string {
	var out []string
	for _, v := range h.Values("X-Forwarded-For") {
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				out = append(out, e)
			}
		}
	}
	return out
}

// Header returns a KeyFunc keyed by the value of the request header name
// (an API key, an app key), trimmed of spaces. A missing or empty header is
// an error wrapping ErrNoKey.
func Header(name string) KeyFunc {
	return func(r *http.Request) (string, error) {
		v := strings.TrimSpace(r.Header.Get(name))
		if v == "" {
			return "", fmt.Errorf("%w: header %s is missing", ErrNoKey, name)
		}
		return v, nil
	}
}

// Join returns a KeyFunc that joins the keys of parts with sep, such as
// an app key and a method: Join("-", Header("X-App-Key"), method). The
// first error of a part is returned.
//
// Distinct tuples of part keys give distinct keys, so two requests share a
// subject (and its counters) only when every part is equal. A part that
// contains neither '%' nor any byte of sep is joined unchanged; in the
// others, every '%' and every byte that occurs in sep is percent-encoded
// as '%' and two upper-case hex digits. With sep "-", ("acme",
// "order-create") gives "acme-order%2Dcreate" and ("acme-order", "create")
// gives "acme%2Dorder-create"; ("app", "order.create") gives
// "app-order.create". Rules are named by the joined key: the rules of app
// key "acme-eu" and method "pay" are those of subject "acme%2Deu-pay".
//
// Join panics if sep is empty or contains '%': such a separator cannot be
// told from the escapes.
func Join(sep string, parts ...KeyFunc) KeyFunc {
	if sep == "" || strings.Contains(sep, "%") {
		panic(fmt.Sprintf("httplimit.Join: separator %q must be non-empty and must not contain '%%'", sep))
	}
	special := "%" + sep // the bytes a part must not hold unescaped
	return func(r *http.Request) (string, error) {
		var b strings.Builder
		for i, p := range parts {
			k, err := p(r)
			if err != nil {
				return "", err
			}
			if i > 0 {
				b.WriteString(sep)
			}
			if !hasAnyByte(k, special) {
				b.WriteString(k)
				continue
			}
			for j := 0; j < len(k); j++ {
				if c := k[j]; c == '%' || strings.IndexByte(sep, c) >= 0 {
					b.WriteByte('%')
					b.WriteByte(upperHex[c>>4])
					b.WriteByte(upperHex[c&0xF])
				} else {
					b.WriteByte(c)
				}
			}
		}
		return b.String(), nil
	}
}

const upperHex = "0123456789ABCDEF"

// hasAnyByte reports whether s holds any byte of set (strings.ContainsAny
// compares runes, which misses the bytes of a multi-byte rune of set
// inside another rune or invalid UTF-8).
func hasAnyByte(s, set string) bool {
	for i := 0; i < len(set); i++ {
		if strings.IndexByte(s, set[i]) >= 0 {
			return true
		}
	}
	return false
}
