package httplimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/rules"
	"github.com/quotagate/limiter/strategy"
)

// Problem types of the response bodies, from
// draft-ietf-httpapi-ratelimit-headers-11 section 5.
const (
	// ProblemQuotaExceeded is the type of a 429 body: a rule refused the
	// request.
	ProblemQuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	// ProblemReducedCapacity is the type of the 503 body of a denial no
	// rule made: a Degraded one (Redis could not decide and the fail mode
	// is FailClosed), or one Redis could not count in time
	// (strategy.ErrStaleWindow).
	ProblemReducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
)

// Middleware limits the requests of an http.Handler. It is safe for
// concurrent use.
type Middleware struct {
	rl       *rules.Limiter
	key      KeyFunc
	legacy   bool
	onError  func(w http.ResponseWriter, r *http.Request, err error)
	onDenied func(w http.ResponseWriter, r *http.Request, d rules.Decision)
	log      *logLimiter // nil: no logging
	scope    string
	rule     KeyFunc // nil: a request's rules are its key's
}

// Option configures a Middleware.
type Option func(*Middleware) error

// WithKey sets how a request's subject is derived (default: ClientIP()
// with no trusted proxy).
func WithKey(k KeyFunc) Option {
	return func(m *Middleware) error {
		if k == nil {
			return fmt.Errorf("httplimit: %w: nil KeyFunc", limiter.ErrInvalidOption)
		}
		m.key = k
		return nil
	}
}

// WithLegacyHeaders sets whether the X-RateLimit-Limit, -Remaining and
// -Reset fields are written besides RateLimit-Policy and RateLimit (default
// true).
func WithLegacyHeaders(on bool) Option {
	return func(m *Middleware) error {
		m.legacy = on
		return nil
	}
}

// WithErrorHandler sets f to answer a request that could not be decided:
// an error wrapping ErrNoKey from the KeyFunc, limiter.ErrInvalidKey for a
// key the limiter refuses (an empty one, say), or the limiter's error under
// FailError (Redis down). The default answers 400 Bad Request to the first
// two, and to limiter.ErrContention (Redis answered, but the key was too
// contended to decide) what WriteDenied answers the contended denial of
// FailOpen and FailClosed: 429 with Retry-After, naming no rule; and 503
// Service Unavailable to anything else, with a short text body. Only the
// last two are logged as requests the limiter could not decide. f may
// instead call the next handler: the Middleware does not.
func WithErrorHandler(f func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return func(m *Middleware) error {
		if f == nil {
			return fmt.Errorf("httplimit: %w: nil error handler", limiter.ErrInvalidOption)
		}
		m.onError = f
		return nil
	}
}

// WithDeniedHandler sets f to answer a denied request, after the rate
// limit fields are set on w's header. The default, WriteDenied, answers
// 429 Too Many Requests with a small application/problem+json body naming
// the violated rule; f may count or log a denial and then call it. A
// denial that no rule made names none: a Degraded one made by FailClosed
// with Redis down is 503 Service Unavailable, as is one Redis made because
// the round trip was as long as the window, counting nothing
// (strategy.ErrStaleWindow: the rate limit fields show the quota left); one
// because the key was too contended to decide (limiter.ErrContention)
// stays 429.
func WithDeniedHandler(f func(w http.ResponseWriter, r *http.Request, d rules.Decision)) Option {
	return func(m *Middleware) error {
		if f == nil {
			return fmt.Errorf("httplimit: %w: nil denied handler", limiter.ErrInvalidOption)
		}
		m.onDenied = f
		return nil
	}
}

// WithRules sets how the subject whose rules apply to a request is derived,
// apart from the key it is counted under: with WithRules(Route()) the rule
// set names routes ("POST /login": 3/min) and every client (the key, by
// default its IP) gets its own counters of its route's rules. A request is
// then counted under its rule subject and its key joined by a space
// (escaped as Join does), and a route without rules gets the set's
// Default.
func WithRules(k KeyFunc) Option {
	return func(m *Middleware) error {
		if k == nil {
			return fmt.Errorf("httplimit: %w: nil rules KeyFunc", limiter.ErrInvalidOption)
		}
		m.rule = k
		return nil
	}
}

// WithLogger sets where the Middleware logs the requests Redis could not
// decide: an error under FailError, or a Degraded decision made by the fail
// mode (default slog.Default(); nil logs nothing). A line names the error's
// kind (limiter.ErrorKind), the error and the request's method and path;
// at most one line is written every LogInterval, counting the requests
// left unlogged since the previous line ("suppressed"), so an outage does
// not flood the log. A request whose client went away (its context
// canceled) is not logged; one whose deadline ran out is.
func WithLogger(l *slog.Logger) Option {
	return func(m *Middleware) error {
		m.log = newLogLimiter(l)
		return nil
	}
}

// New returns a Middleware that decides each request under the rules rl
// holds for its subject (see WithKey).
func New(rl *rules.Limiter, opts ...Option) (*Middleware, error) {
	if rl == nil {
		return nil, fmt.Errorf("httplimit: %w: nil rules limiter", limiter.ErrInvalidOption)
	}
	m := &Middleware{rl: rl, key: ClientIP(), legacy: true, onError: defaultError, onDenied: WriteDenied, log: newLogLimiter(slog.Default())}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("httplimit: %w: nil option", limiter.ErrInvalidOption)
		}
		if err := o(m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// NewFixed returns a Middleware that gives every subject the same limits,
// decided together with lim: a rule set whose Default is limits.
//
// scope names the middleware's counters: they live under lim's prefix
// followed by ":" and scope (prefix:scope:{subject}:rule), so middlewares
// with different scopes never share a counter, even on one Limiter with
// limits of the same period (3/min on /login and 100/min on /search, both
// keyed by client IP). Give two middlewares the same scope only to make
// them share one budget. scope is required: visible ASCII (no space
// or control character) without braces.
func NewFixed(lim *limiter.Limiter, scope string, limits []limiter.Limit, opts ...Option) (*Middleware, error) {
	if lim == nil {
		return nil, fmt.Errorf("httplimit: %w: nil limiter", limiter.ErrInvalidOption)
	}
	if scope == "" || strings.ContainsFunc(scope, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return nil, fmt.Errorf("httplimit: %w: scope %q must be visible ASCII (no space), not empty", limiter.ErrInvalidOption, scope)
	}
	scoped, err := lim.With(limiter.WithPrefix(lim.Prefix() + ":" + scope))
	if err != nil {
		return nil, fmt.Errorf("httplimit: scope %q: %w", scope, err)
	}
	rl, err := rules.New(context.Background(), scoped, rules.Static(&rules.Set{Default: rules.LimitUnknown(limits...)}))
	if err != nil {
		return nil, err
	}
	m, err := New(rl, opts...)
	if err != nil {
		return nil, err
	}
	m.scope = scope
	return m, nil
}

// Handler returns next limited: a request is decided before next sees it;
// an admitted one reaches next with the rate limit fields set on the
// response header (see WriteHeaders), a denied one is answered by the
// denied handler.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := m.Decide(w, r); ok {
			next.ServeHTTP(w, r)
		}
	})
}

// Decide decides r and sets the rate limit fields on w's header. When it
// returns false the request was denied or could not be decided and has been
// answered; when true the caller serves it. Handler is built on it; use it
// directly to limit inside a handler.
func (m *Middleware) Decide(w http.ResponseWriter, r *http.Request) (rules.Decision, bool) {
	key, err := m.key(r)
	if err != nil {
		m.onError(w, r, err)
		return rules.Decision{}, false
	}
	var d rules.Decision
	if m.rule != nil {
		rule, rerr := m.rule(r)
		switch {
		case rerr != nil:
			m.onError(w, r, rerr)
			return rules.Decision{}, false
		case key == "":
			// an empty key names no client, as without rules; joined
			// with the rule it would name one shared by all of them
			err = fmt.Errorf("httplimit: %w: the key function returned an empty key", limiter.ErrInvalidKey)
		default:
			d, err = m.rl.AllowFor(r.Context(), rule, joinKeys(" ", rule, key))
		}
	} else {
		d, err = m.rl.Allow(r.Context(), key)
	}
	// A request whose client went away (its context canceled, as net/http
	// does) ends the decision too: that is not an outage, and must not
	// spend the log's budget that a real one needs. A deadline the server
	// set on the request (a timeout middleware) that ran out while Redis
	// did not answer is one, and logged.
	gone := errors.Is(r.Context().Err(), context.Canceled)
	if err != nil {
		if !errors.Is(err, limiter.ErrInvalidKey) && !gone {
			// (a key the limiter refuses, such as an empty one, is the
			// request's or the KeyFunc's, not an outage)
			m.log.report(r, m.scope, err, false)
		}
		m.onError(w, r, err)
		return d, false
	}
	if d.Degraded && !gone {
		m.log.report(r, m.scope, d.Cause, true)
	}
	WriteHeaders(w.Header(), d, m.legacy)
	if !d.Allowed {
		m.onDenied(w, r, d)
		return d, false
	}
	return d, true
}

func defaultError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, ErrNoKey) || errors.Is(err, limiter.ErrInvalidKey) {
		http.Error(w, "400 bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if errors.Is(err, limiter.ErrContention) {
		// FailError's form of the contended denial that FailOpen and
		// FailClosed make (Degraded, RetryAfter at most a second): the
		// same answer
		w.Header().Set(HeaderRetry, "1")
		WriteDenied(w, r, rules.Decision{Result: limiter.Result{Degraded: true, Cause: err}})
		return
	}
	http.Error(w, "503 service unavailable: the rate limiter cannot decide", http.StatusServiceUnavailable)
}

// problem is an RFC 9457 problem details body; violated-policies only for
// a quota exceeded (a 503 of the fail mode violated none).
type problem struct {
	Type     string    `json:"type"`
	Title    string    `json:"title"`
	Status   int       `json:"status"`
	Violated *[]string `json:"violated-policies,omitempty"`
}

// WriteDenied is the default answer to a denied request (see
// WithDeniedHandler).
func WriteDenied(w http.ResponseWriter, r *http.Request, d rules.Decision) {
	v := violated(d)
	p := problem{Type: ProblemQuotaExceeded, Title: "Too Many Requests", Status: http.StatusTooManyRequests, Violated: &v}
	if d.Degraded && !errors.Is(d.Cause, limiter.ErrContention) || errors.Is(d.Cause, strategy.ErrStaleWindow) {
		p = problem{Type: ProblemReducedCapacity, Title: "Service Unavailable", Status: http.StatusServiceUnavailable}
	}
	body, _ := json.Marshal(p)
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}
