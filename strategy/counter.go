package strategy

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// maxCounter is the largest counter a strategy reads: 2^53 - 1, the last
// integer Lua's numbers hold exactly. Counters stay below limiter.MaxRate
// plus a cost, far below it.
const maxCounter = 1<<53 - 1

// parseCounter reads a counter as FixedWindow and Optimistic write it: a
// non-negative decimal integer as INCRBY reads it, without sign, spaces,
// fraction, exponent, hex or leading zero, at most maxCounter. Anything
// else is limiter.ErrCorruptCounter, so a decision never rests on a value
// that INCRBY would then refuse.
func parseCounter(v any) (int64, error) {
	n, err := parseRedisInt(v)
	if err == nil && (n < 0 || n > maxCounter) {
		err = fmt.Errorf("%w: %d is out of range", limiter.ErrCorruptCounter, n)
	}
	return n, err
}

// parseRedisInt reads an integer reply or value the way INCRBY does: an
// optional minus sign, then "0" or digits without a leading zero, within
// int64. Anything else is limiter.ErrCorruptCounter; a nil reply is
// store.ErrNil.
func parseRedisInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		digits := strings.TrimPrefix(x, "-")
		if digits == "0" && len(x) == 1 || len(digits) > 0 && digits[0] >= '1' && digits[0] <= '9' && allDigits(digits) {
			if n, err := strconv.ParseInt(x, 10, 64); err == nil {
				return n, nil
			}
		}
	case nil:
		return 0, store.ErrNil
	}
	return 0, fmt.Errorf("%w: %.40q is not an integer", limiter.ErrCorruptCounter, fmt.Sprint(v))
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// CounterError returns err wrapping limiter.ErrCorruptCounter when it is
// Redis refusing a counter: a key of another type (WRONGTYPE), a value
// INCRBY cannot read or cannot add to (one near 2^63, which no limit
// reaches: "increment or decrement would overflow"), or a script's error
// reply that says "limiter corrupt counter" (the shipped scripts' for a
// key that holds no counter of theirs; a strategy's own script may reply
// the same). Else it returns err. A strategy of another package calls it
// on the errors of its store calls, so that a corrupt counter is
// ErrCorruptCounter to callers and observers, not an outage (property 29
// of the conformance suite checks it).
func CounterError(err error) error { return corruptErr(err) }

// corruptErr is CounterError.
func corruptErr(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if strings.Contains(msg, "WRONGTYPE") || strings.Contains(msg, "not an integer") || strings.Contains(msg, "would overflow") || strings.Contains(msg, "limiter corrupt counter") {
		return fmt.Errorf("%w: %w", limiter.ErrCorruptCounter, err)
	}
	return err
}
