package strategy

import (
	"fmt"
	"strings"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// maxCounterDigits bounds a counter's decimal digits: counters stay below
// limiter.MaxRate plus a cost, far below 10^16, and exact in Lua's numbers.
const maxCounterDigits = 16

// parseCounter reads a counter as the strategies write it: a non-negative
// decimal integer as INCRBY reads it, without sign, spaces, fraction,
// exponent, hex or leading zero. Anything else is limiter.ErrCorruptCounter,
// so a decision never rests on a value INCRBY would then refuse.
func parseCounter(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		if x >= 0 {
			return x, nil
		}
	case string:
		if validCounter(x) {
			var n int64
			for i := 0; i < len(x); i++ {
				n = n*10 + int64(x[i]-'0')
			}
			return n, nil
		}
	case nil:
		return 0, store.ErrNil
	}
	return 0, fmt.Errorf("%w: %.40q", limiter.ErrCorruptCounter, fmt.Sprint(v))
}

func validCounter(s string) bool {
	if s == "0" {
		return true
	}
	if len(s) == 0 || len(s) > maxCounterDigits || s[0] < '1' || s[0] > '9' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// corruptErr marks err as limiter.ErrCorruptCounter when Redis refused a
// counter: a key of another type (WRONGTYPE), a value INCRBY cannot read,
// or the corrupt counter error of the strategies' scripts.
func corruptErr(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if strings.Contains(msg, "WRONGTYPE") || strings.Contains(msg, "not an integer") || strings.Contains(msg, "limiter corrupt counter") {
		return fmt.Errorf("%w: %w", limiter.ErrCorruptCounter, err)
	}
	return err
}
