package store

import (
	"fmt"
	"strconv"
)

// Int64 converts a normalised reply value to int64. A string holding a
// base-10 integer (a counter read with GET) converts too; anything else is an
// error that names the type, never a panic.
func Int64(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("store: reply %q is not an integer: %w", x, err)
		}
		return n, nil
	case nil:
		return 0, ErrNil
	case error:
		// an element of an array that is an error reply
		return 0, fmt.Errorf("store: error reply, not an integer: %w", x)
	default:
		return 0, fmt.Errorf("store: reply of type %T is not an integer", v)
	}
}

// String converts a normalised reply value to string.
func String(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case nil:
		return "", ErrNil
	case error:
		return "", fmt.Errorf("store: error reply, not a string: %w", x)
	default:
		return "", fmt.Errorf("store: reply of type %T is not a string", v)
	}
}

// Slice converts a normalised reply value to []any.
func Slice(v any) ([]any, error) {
	switch x := v.(type) {
	case []any:
		return x, nil
	case nil:
		return nil, ErrNil
	case error:
		return nil, fmt.Errorf("store: error reply, not an array: %w", x)
	default:
		return nil, fmt.Errorf("store: reply of type %T is not an array", v)
	}
}

// Int64s converts an array reply whose elements are all integers.
func Int64s(v any) ([]int64, error) {
	arr, err := Slice(v)
	if err != nil {
		return nil, err
	}
	return AppendInt64s(make([]int64, 0, len(arr)), arr)
}
