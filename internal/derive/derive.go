package derive

import (
	"reflect"
	"time"

	"github.com/quotagate/limiter/store"
)

// Token is the argument of KeyDeriver's method.
type Token struct{}

// KeyDeriver is implemented by strategies whose Decide reads the request's
// keys only through limiter.Request.AppendKey. DerivesKeys returns the
// strategy itself: a type that embeds such a strategy (a decorator, whose
// own Decide may read Request.Keys or build a Request of its own) has the
// method promoted, and its result is then the embedded strategy, not the
// decorator, so the Limiter that compares it with its strategy builds the
// keys for the decorator.
type KeyDeriver interface {
	DerivesKeys(Token) any
}

// Derives reports whether s declares KeyDeriver itself, not through a type
// it embeds.
func Derives(s any) bool {
	d, ok := s.(KeyDeriver)
	return ok && d.DerivesKeys(Token{}) == s
}

// ScriptBatcher is implemented by the strategies of this module whose
// Decide is their BatchScript's one script call. BatchesItself returns the
// strategy itself (its receiver): through a type that embeds one (a
// decorator with a Decide of its own) it is promoted and returns the
// embedded strategy, so that the Limiter, seeing another type, decides that
// type's requests with its Decide, not in a batch.
type ScriptBatcher interface {
	BatchesItself(Token) any
}

// Own reports whether decl, what a method of s returned as its receiver,
// is s itself or what s points to: s declares the method, no type it
// embeds does.
func Own(s, decl any) bool {
	ts, td := reflect.TypeOf(s), reflect.TypeOf(decl)
	return ts == td || ts == reflect.PointerTo(td)
}

// ClockUser is implemented by the strategies of this module that read the
// app's clock (AlignedWindow, Bucketed): UseClock makes now their clock when
// they were given none of their own and have decided nothing yet, and
// reports whether it did.
type ClockUser interface {
	UseClock(Token, func() time.Time) bool
}

// ManyPerCall is the most requests Limiter.AllowMany puts in one call of a
// many-request script: enough that the server's cost of a call is spread
// thin, few enough that one call holds the server for well under a
// millisecond. A batch of calls of one script is packed in order, in
// calls of ManyPerCall requests.
const ManyPerCall = 64

// Call is one script call of a batch a RoundBatcher makes: Script on Keys
// with Args, which the Limiter sends as EVALSHA (EVAL when the server's
// cache lacks it), or packs with others in a call of the script's
// many-request companion.
type Call struct {
	Script *store.Script
	Keys   []string
	Args   []any
}
