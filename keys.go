package limiter

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quotagate/limiter/internal/argcache"
)

// DefaultPrefix is the key prefix of a Limiter built without WithPrefix.
const DefaultPrefix = "limiter"

// Bounds on the parts of a key.
const (
	// maxPlainSubject is the longest subject kept verbatim in a key; longer
	// (or hostile) subjects are replaced by a hash.
	maxPlainSubject = 128
	// MaxNameLen is the longest Limit.Name.
	MaxNameLen = 128
	// MaxPrefixLen is the longest prefix.
	MaxPrefixLen = 128
)

// keyBuilder lays out counter keys as
//
//	prefix:{subject}:rule
//
// The subject is the Cluster hash tag, so all keys of one decision share a
// slot. Redis ends a hash tag at the first '}', so a subject is kept verbatim
// only when it is printable ASCII without braces, does not start with '#'
// and is at most maxPlainSubject bytes; any other subject becomes
// '#' + 32 hex digits of its SHA-256. The prefix has no braces, so the first
// '{' and '}' of a key delimit the subject, and the rule follows: the layout
// is injective (distinct inputs give distinct keys, up to a SHA-256
// collision) and every key is at most a few hundred bytes.
type keyBuilder struct {
	prefix string
}

func validPrefix(p string) error {
	if strings.ContainsAny(p, "{}") {
		return fmt.Errorf("%w: prefix %q contains a brace", ErrInvalidOption, p)
	}
	if len(p) > MaxPrefixLen {
		return fmt.Errorf("%w: prefix is longer than %d bytes", ErrInvalidOption, MaxPrefixLen)
	}
	return nil
}

func plainSubject(s string) bool {
	if len(s) > maxPlainSubject || s[0] == '#' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '{' || c == '}' {
			return false
		}
	}
	return true
}

// hashTag returns subject as it stands between a key's braces: verbatim
// when plain, else '#' and 32 hex digits of its SHA-256.
func hashTag(subject string) string {
	if plainSubject(subject) {
		return subject
	}
	sum := sha256.Sum256([]byte(subject))
	return "#" + hex.EncodeToString(sum[:16])
}

// check validates subject and limits, as build does.
func (b keyBuilder) check(subject string, limits []Limit) error {
	if subject == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if len(limits) == 0 {
		return fmt.Errorf("%w: no limits given", ErrInvalidLimit)
	}
	if len(limits) > MaxLimits {
		return fmt.Errorf("%w: %d limits, at most %d", ErrInvalidLimit, len(limits), MaxLimits)
	}
	for i, l := range limits {
		if err := l.validate(); err != nil {
			return err
		}
		if len(l.Name) > MaxNameLen {
			return fmt.Errorf("%w: name is longer than %d bytes", ErrInvalidLimit, MaxNameLen)
		}
		for _, o := range limits[:i] {
			if o.Name == l.Name && (l.Name != "" || o.Period == l.Period) {
				return fmt.Errorf("%w: limits %s and %s share one counter; give them distinct names", ErrInvalidLimit, o, l)
			}
		}
	}
	return nil
}

// build validates subject and limits and returns one key per limit, in dst
// when it has room.
func (b keyBuilder) build(subject string, limits []Limit, dst []string) ([]string, error) {
	if err := b.check(subject, limits); err != nil {
		return nil, err
	}
	tag := hashTag(subject)
	keys := dst[:0]
	if cap(keys) < len(limits) {
		keys = make([]string, 0, len(limits))
	}
	keys = keys[:len(limits)]
	var stack [MaxPrefixLen + maxPlainSubject + MaxNameLen + 8]byte // the longest key
	for i, l := range limits {
		keys[i] = string(b.appendKey(stack[:0], tag, l))
	}
	return keys, nil
}

// appendKey appends to dst the key of limit l for the subject whose hash
// tag (hashTag) is tag.
func (b keyBuilder) appendKey(dst []byte, tag string, l Limit) []byte {
	dst = append(dst, b.prefix...)
	dst = append(dst, ":{"...)
	dst = append(dst, tag...)
	if l.Name != "" {
		dst = append(dst, "}:n="...)
		return append(dst, l.Name...)
	}
	dst = append(dst, "}:"...)
	return append(dst, periodSuffix(l.Period)...)
}

// periodSuffixes remembers the rule part of unnamed limits' keys ("1000ms"):
// a service has a few periods, used on every call.
var periodSuffixes argcache.Cache[string]

// periodSuffix returns the rule part of the key of an unnamed limit.
func periodSuffix(p time.Duration) string {
	ms := p.Milliseconds()
	if s, ok := periodSuffixes.Get(ms); ok {
		return s
	}
	s := strconv.FormatInt(ms, 10) + "ms"
	periodSuffixes.Put(ms, s)
	return s
}

// Key returns the counter key of subject for limit l, as a Limiter with
// prefix lays it out. Tools and tests use it to inspect counters.
func Key(prefix, subject string, l Limit) (string, error) {
	if err := validPrefix(prefix); err != nil {
		return "", err
	}
	keys, err := keyBuilder{prefix: prefix}.build(subject, []Limit{l}, nil)
	if err != nil {
		return "", err
	}
	return keys[0], nil
}
