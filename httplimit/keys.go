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
// may carry a port ("203.0.113.7:4711", "[2001:db8::1]:443"); an entry
// "unknown" (a proxy that did not know its client) keys the request by the
// trusted proxy that wrote it, so that unidentified clients are limited
// together and cannot pose as anyone; any other entry that does not parse
// as an IP address is an error (ErrNoKey). IPv4-mapped IPv6 addresses are
// keyed as IPv4, and a trusted prefix given in that form
// (::ffff:10.0.0.0/104) is the IPv4 one; zones are dropped. IPv6Prefix
// groups IPv6 clients by network.
func ClientIP(trusted ...netip.Prefix) KeyFunc {
	ps := make([]netip.Prefix, len(trusted))
	for i, p := range trusted {
		// An IPv4-mapped prefix (::ffff:10.0.0.0/104) is its IPv4 one:
		// addresses are unmapped before they are checked.
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
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
			if strings.EqualFold(hops[i], "unknown") {
				break // keyed by the trusted proxy that wrote it
			}
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

// parseIP parses an address with or without a port ("a.b.c.d:p",
// "[v6]:p", "[v6]").
func parseIP(s string) (netip.Addr, error) {
	s = strings.TrimSpace(s)
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), nil
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, err
	}
	return a.Unmap().WithZone(""), nil
}

// NoRoute is the pattern the framework adapters (limitergin, limiterecho)
// give a request their framework routes nowhere (it answers 404 or 405),
// whatever its method (which the client chooses): under WithRules(Route())
// it names no rule, so the rule set's Default decides it, one budget for
// all of a client's unrouted requests, as an http.ServeMux's "/" catch-all
// would be, and the framework answers what it admits.
const NoRoute = "(no route)"

// Route returns a KeyFunc keyed by the pattern the http.ServeMux matched
// (Request.Pattern, "POST /login"): a middleware wrapping the handlers a
// mux serves can count per route, and Join(" ", Route(), ClientIP()) per
// route and client. A request the mux did not route (a middleware
// wrapping the mux itself) has no pattern: ErrNoKey.
func Route() KeyFunc {
	return func(r *http.Request) (string, error) {
		if r.Pattern == "" {
			return "", fmt.Errorf("%w: no route pattern (wrap the handlers the ServeMux routes to, not the mux)", ErrNoKey)
		}
		return r.Pattern, nil
	}
}

// IPv6Prefix returns k with IPv6 keys grouped by their first bits bits
// (64: one key per /64, the block one subscriber usually holds, so that a
// client cannot dodge its limit by rotating addresses within it). IPv4 keys,
// and keys that are not addresses, pass unchanged; an IPv4-mapped IPv6
// address (::ffff:192.0.2.1, as dual-stack proxies report IPv4 clients)
// becomes its IPv4 address. It panics unless bits
// is in [1, 128].
func IPv6Prefix(bits int, k KeyFunc) KeyFunc {
	if bits < 1 || bits > 128 {
		panic(fmt.Sprintf("httplimit: IPv6Prefix(%d): bits must be in [1, 128]", bits))
	}
	return func(r *http.Request) (string, error) {
		key, err := k(r)
		if err != nil {
			return "", err
		}
		a, perr := netip.ParseAddr(key)
		if perr != nil || !a.Is6() {
			return key, nil
		}
		if a.Is4In6() {
			// an IPv4 client as a dual-stack proxy reports it
			// (::ffff:192.0.2.1): its own key, as ClientIP gives it
			return a.Unmap().String(), nil
		}
		p, _ := a.Prefix(bits)
		return p.String(), nil
	}
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
	return func(r *http.Request) (string, error) {
		keys := make([]string, len(parts))
		for i, p := range parts {
			k, err := p(r)
			if err != nil {
				return "", err
			}
			keys[i] = k
		}
		return joinKeys(sep, keys...), nil
	}
}

// joinKeys joins keys with sep, percent-encoding '%' and the bytes of sep
// in each (see Join).
func joinKeys(sep string, keys ...string) string {
	special := "%" + sep // the bytes a part must not hold unescaped
	var b strings.Builder
	for i, k := range keys {
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
	return b.String()
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
