package rules

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/quotagate/limiter"
)

// ErrInvalidConfig is the sentinel of every invalid rule set: a Set that
// fails Validate, or a file or hash that does not parse. The error is a
// *ConfigError naming the field. Match it with errors.Is.
var ErrInvalidConfig = errors.New("rules: invalid config")

// ErrEmpty is a Redis hash that is missing or has no fields, which a
// RedisHash source rejects unless AllowEmpty is set: a hash deleted by
// mistake keeps the last good rules in force instead of leaving every
// subject to the default.
var ErrEmpty = errors.New("rules: no rules found")

// ConfigError is an invalid rule set, with the field at fault.
type ConfigError struct {
	// Source names where the rules came from (a file, a Redis hash); empty
	// for a Set built in Go.
	Source string
	// Field is the path of the field at fault, in the file's terms:
	// `subjects["app-order.create"][1].period`, `default`, `fail_mode`; for a
	// Redis hash, the hash field and the path in its value:
	// `"app-order.create"[1].period`.
	Field string
	// Err says what is wrong. It wraps limiter.ErrInvalidLimit for a limit
	// out of the limiter's bounds.
	Err error
}

// Error formats the error as "rules: invalid config: SOURCE: FIELD: ERR",
// leaving out the parts that are empty (nil).
func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(ErrInvalidConfig.Error())
	if e.Source != "" {
		b.WriteString(": ")
		b.WriteString(e.Source)
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns Err.
func (e *ConfigError) Unwrap() error { return e.Err }

// Is reports whether target is ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Action is what the Default of a Set does with a subject that has no rules
// of its own.
type Action int

const (
	// Deny refuses every request of an unknown subject, without touching
	// Redis. It is the zero Action: a set says explicitly when unknown
	// subjects may pass.
	Deny Action = iota
	// Allow admits every request of an unknown subject, without touching
	// Redis and without counting.
	Allow
	// Limit decides an unknown subject against the Default's Limits, with
	// counters of its own (each unknown subject has its own quota).
	Limit
)

// String names the action as configuration files spell it.
func (a Action) String() string {
	switch a {
	case Deny:
		return "deny"
	case Allow:
		return "allow"
	case Limit:
		return "limit"
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// Default is what a Set does with a subject that has no rules of its own.
// The zero Default denies.
type Default struct {
	// Action is Deny, Allow or Limit.
	Action Action
	// Limits are the rules of every unknown subject when Action is Limit;
	// empty otherwise.
	Limits []limiter.Limit
}

// DenyUnknown is the Default that refuses unknown subjects.
func DenyUnknown() Default { return Default{Action: Deny} }

// AllowUnknown is the Default that admits unknown subjects without limit.
func AllowUnknown() Default { return Default{Action: Allow} }

// LimitUnknown is the Default that gives each unknown subject limits of its
// own.
func LimitUnknown(limits ...limiter.Limit) Default { return Default{Action: Limit, Limits: limits} }

// Set is a rule set: the limits of each subject (an appkey+method, a user,
// an IP: any string the caller derives from a request), what to do with
// other subjects, and optionally the fail mode of its decisions. Build one
// in Go, or load it from a file or a Redis hash with a Source. A Set in use
// by a Limiter must not be modified.
//
// Give rules stable names (limiter.Limit.Name): a rule's counter is named
// after its Name, or after its Period when the name is empty, so a reload
// that changes a rule's Rate keeps the count of the current window, while
// renaming a rule starts a fresh counter. A reload that changes a named
// rule's Period keeps the count with FixedWindow (whose window keeps its
// end, within the new period when that is shorter), SlidingLog (its units
// count in the new period) and TokenBucket (its tokens); SlidingWindow
// keeps it when the period is shortened, but a count written under a
// shorter period reads, under a longer one, as an older window's, which
// weighs next to nothing: the subject may be admitted up to the new Rate
// at once, as after a fixed window's end. AlignedWindow and Bucketed name
// each window after its period too, so the new period starts a fresh one;
// GCRA keeps its state, a time (when the limit is full again), which the
// new period's emission interval reads as another count.
type Set struct {
	// Subjects maps each subject to its limits, decided together: a request
	// is admitted only when every limit admits it, and a request refused by
	// one limit consumes nothing from the others.
	Subjects map[string][]limiter.Limit
	// Default is what happens to a subject not in Subjects.
	Default Default
	// FailMode, when not nil, overrides the Limiter's fail mode for the
	// decisions of this set: FailError, FailOpen or FailClosed.
	FailMode *limiter.FailMode

	// origin names the source the set was loaded from, for the errors of
	// ValidateFor, which runs after the source's Load ("" for a Set built
	// in Go); hash: its subjects are the fields of a Redis hash, named as
	// such in the errors' paths.
	origin string
	hash   bool
}

// subjectPath is the path of subj's limits in s's errors: in the file's
// terms, or a Redis hash's field.
func (s *Set) subjectPath(subj string) string {
	if s.hash {
		return strconv.Quote(subj)
	}
	return "subjects[" + strconv.Quote(subj) + "]"
}

// Validate reports the first invalid field of s, in subject order, as a
// *ConfigError (errors.Is ErrInvalidConfig). It checks what every call
// would check whatever the strategy (the limiter's bounds on each limit,
// at most limiter.MaxLimits per subject, no two limits of a subject
// sharing one counter), that every subject has at least one limit, and
// that rule names are visible ASCII without quotes or backslashes, so that
// they can name policies in HTTP headers. ValidateFor checks the bounds of
// a Limiter's strategy as well.
func (s *Set) Validate() error {
	if s == nil {
		return &ConfigError{Err: errors.New("nil set")}
	}
	subjects := make([]string, 0, len(s.Subjects))
	for subj := range s.Subjects {
		subjects = append(subjects, subj)
	}
	sort.Strings(subjects)
	for _, subj := range subjects {
		path := s.subjectPath(subj)
		if subj == "" {
			return &ConfigError{Field: path, Err: errors.New("empty subject")}
		}
		if err := checkLimits(path, s.Subjects[subj]); err != nil {
			return err
		}
	}
	switch s.Default.Action {
	case Deny, Allow:
		if len(s.Default.Limits) > 0 {
			return &ConfigError{Field: "default", Err: fmt.Errorf("action %s with limits; use Limit to apply them", s.Default.Action)}
		}
	case Limit:
		if err := checkLimits("default", s.Default.Limits); err != nil {
			return err
		}
	default:
		return &ConfigError{Field: "default", Err: fmt.Errorf("unknown action %d", int(s.Default.Action))}
	}
	if m := s.FailMode; m != nil && (*m < limiter.FailError || *m > limiter.FailClosed) {
		return &ConfigError{Field: "fail_mode", Err: fmt.Errorf("unknown fail mode %d", int(*m))}
	}
	return nil
}

// ValidateFor reports what Validate reports, then the first limit that
// lim refuses on every call (Limiter.CheckLimits: its strategy's own
// bounds, such as a sliding log's 10 000 per window), as a *ConfigError
// that names it and wraps limiter.ErrInvalidLimit. Reload checks a set
// with it before putting it in force, so such a set keeps the last good
// one in force instead of failing every call of the subjects it names.
func (s *Set) ValidateFor(lim *limiter.Limiter) error {
	if err := s.Validate(); err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) && ce.Source == "" {
			ce.Source = s.origin
		}
		return err
	}
	if lim == nil {
		return &ConfigError{Err: fmt.Errorf("%w: nil limiter", limiter.ErrInvalidOption)}
	}
	subjects := make([]string, 0, len(s.Subjects))
	for subj := range s.Subjects {
		subjects = append(subjects, subj)
	}
	sort.Strings(subjects)
	check := func(path string, limits []limiter.Limit) error {
		for i, l := range limits {
			if err := lim.CheckLimits(l); err != nil {
				return &ConfigError{Source: s.origin, Field: path + "[" + strconv.Itoa(i) + "]", Err: err}
			}
		}
		return nil
	}
	for _, subj := range subjects {
		if err := check(s.subjectPath(subj), s.Subjects[subj]); err != nil {
			return err
		}
	}
	return check("default", s.Default.Limits)
}

// checkLimits checks the limits of one subject.
func checkLimits(path string, limits []limiter.Limit) error {
	if len(limits) == 0 {
		return &ConfigError{Field: path, Err: errors.New("no rules (every subject needs at least one; remove it to apply the default)")}
	}
	if len(limits) > limiter.MaxLimits {
		return &ConfigError{Field: path, Err: fmt.Errorf("%w: %d rules, at most %d", limiter.ErrInvalidLimit, len(limits), limiter.MaxLimits)}
	}
	for i, l := range limits {
		at := path + "[" + strconv.Itoa(i) + "]"
		if field, err := checkLimit(l); err != nil {
			return &ConfigError{Field: at + field, Err: err}
		}
		for j, o := range limits[:i] {
			if o.Name == l.Name && (l.Name != "" || o.Period == l.Period) {
				what := "name " + strconv.Quote(l.Name)
				if l.Name == "" {
					what = "period " + FormatPeriod(l.Period) + " and no name"
				}
				return &ConfigError{Field: at, Err: fmt.Errorf("%w: same counter as rule %d (%s); give the rules distinct names", limiter.ErrInvalidLimit, j, what)}
			}
			if RuleName(o) == RuleName(l) {
				// distinct counters, one name in headers and reports
				return &ConfigError{Field: at + ".name", Err: fmt.Errorf("%w: rule %d is known by the same name, %q (an unnamed rule is known as per- and its period); give the rules distinct names", limiter.ErrInvalidLimit, j, RuleName(l))}
			}
		}
	}
	return nil
}

// checkLimit checks one limit against the limiter's own validation and
// returns the field at fault (".rate", ".period", ...).
func checkLimit(l limiter.Limit) (string, error) {
	if _, err := limiter.Key(limiter.DefaultPrefix, "rules", l); err != nil {
		switch {
		case l.Rate <= 0 || l.Rate > limiter.MaxRate:
			return ".rate", err
		case l.Burst < 0 || l.Burst > limiter.MaxRate:
			return ".burst", err
		case l.Period < limiter.MinPeriod || l.Period > limiter.MaxPeriod || l.Period%time.Millisecond != 0:
			return ".period", err
		case len(l.Name) > limiter.MaxNameLen:
			return ".name", err
		}
		return "", err
	}
	for i := 0; i < len(l.Name); i++ {
		if c := l.Name[i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return ".name", fmt.Errorf("%w: name %q: only visible ASCII without quotes or backslashes", limiter.ErrInvalidLimit, l.Name)
		}
	}
	return "", nil
}

// lookup returns the limits of subject and whether they are its own.
func (s *Set) lookup(subject string) ([]limiter.Limit, bool) {
	if ls, ok := s.Subjects[subject]; ok {
		return ls, true
	}
	return s.Default.Limits, false
}

// clone returns a deep copy of s.
func (s *Set) clone() *Set {
	c := &Set{Subjects: make(map[string][]limiter.Limit, len(s.Subjects)), Default: s.Default, origin: s.origin, hash: s.hash}
	for k, v := range s.Subjects {
		c.Subjects[k] = append([]limiter.Limit(nil), v...)
	}
	c.Default.Limits = append([]limiter.Limit(nil), s.Default.Limits...)
	if s.FailMode != nil {
		m := *s.FailMode
		c.FailMode = &m
	}
	return c
}

// equal reports whether s and o decide alike.
func (s *Set) equal(o *Set) bool {
	if len(s.Subjects) != len(o.Subjects) || s.Default.Action != o.Default.Action ||
		!limitsEqual(s.Default.Limits, o.Default.Limits) ||
		(s.FailMode == nil) != (o.FailMode == nil) || (s.FailMode != nil && *s.FailMode != *o.FailMode) {
		return false
	}
	for k, v := range s.Subjects {
		w, ok := o.Subjects[k]
		if !ok || !limitsEqual(v, w) {
			return false
		}
	}
	return true
}

func limitsEqual(a, b []limiter.Limit) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// RuleName returns the name a rule is known by in headers and reports: its
// Name, or "per-" and its period (per-1s, per-1d) when unnamed.
func RuleName(l limiter.Limit) string {
	if l.Name != "" {
		return l.Name
	}
	return "per-" + FormatPeriod(l.Period)
}

// FormatPeriod formats d as rule files spell periods: whole days as "7d",
// anything else as time.Duration prints it without zero units ("1s",
// "1m", "1h30m", "1m30s", "500ms").
func FormatPeriod(d time.Duration) string {
	const day = 24 * time.Hour
	if d > 0 && d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") || strings.HasSuffix(s, "h0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// ParsePeriod parses a period as rule files spell it: a time.Duration
// ("1s", "500ms", "1h30m") or a whole number of days from 1d to 31d. An
// error is one of spelling, matching ErrInvalidConfig; a period spelt well
// but out of a limit's range (limiter.MinPeriod to MaxPeriod, in whole
// milliseconds) is refused by Validate, as limiter.ErrInvalidLimit.
func ParsePeriod(s string) (time.Duration, error) {
	const day = 24 * time.Hour
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseInt(n, 10, 64)
		if err != nil || days <= 0 || days > int64(limiter.MaxPeriod/day) {
			return 0, spellingError(fmt.Sprintf("period %q: want whole days from 1d to %dd", s, int64(limiter.MaxPeriod/day)))
		}
		return time.Duration(days) * day, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, spellingError(fmt.Sprintf("period %q: want a duration such as \"1s\", \"500ms\", \"1h\" or \"1d\"", s))
	}
	return d, nil
}

// spellingError is a value a rule file cannot spell that way: it matches
// ErrInvalidConfig, and reads the same inside a ConfigError.
type spellingError string

func (e spellingError) Error() string        { return string(e) }
func (e spellingError) Is(target error) bool { return target == ErrInvalidConfig }
