package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/store/goredis"
)

// TestErrorElement: an array's element that is an error reply (as every
// adapter gives it) is, to Int64, String and Slice, their error, wrapped;
// to AppendInt64s, an error with the server's message but not its
// identity: a script that ran and replied with a NOSCRIPT among its values
// must not look like a NOSCRIPT of the call (Run would send it again).
func TestErrorElement(t *testing.T) {
	elem := fmt.Errorf("goredis: %w: %w", store.ErrNoScript, errors.New("NOSCRIPT No matching script"))
	if _, err := store.Int64(elem); !errors.Is(err, store.ErrNoScript) {
		t.Errorf("Int64(error element) = %v; want it wrapped", err)
	}
	if _, err := store.String(elem); !errors.Is(err, store.ErrNoScript) {
		t.Errorf("String(error element) = %v; want it wrapped", err)
	}
	if _, err := store.Slice(elem); !errors.Is(err, store.ErrNoScript) {
		t.Errorf("Slice(error element) = %v; want it wrapped", err)
	}
	_, err := store.AppendInt64s(nil, []any{int64(1), elem})
	if err == nil || errors.Is(err, store.ErrNoScript) || !strings.Contains(err.Error(), "NOSCRIPT No matching script") || !strings.Contains(err.Error(), "element 1") {
		t.Errorf("AppendInt64s of an array with a NOSCRIPT element = %v; want an error naming element 1 and the server's message, not ErrNoScript", err)
	}
}

// TestErrorElementThroughAdapter: through the go-redis adapter on
// miniredis, a script whose table holds an error reply: RunInt64s's error
// carries the server's message ("ERR boom"), which it used to drop.
func TestErrorElementThroughAdapter(t *testing.T) {
	m := redistest.NewMini(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	defer rdb.Close()
	st := goredis.New(rdb)
	s := store.NewScript(`return {1, redis.error_reply("ERR boom")}`)
	v, err := s.Run(context.Background(), st, nil, nil)
	t.Logf("Run = %#v, %v", v, err)
	_, err = s.RunInt64s(context.Background(), st, nil, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("RunInt64s = %v; want an error carrying the server's \"ERR boom\"", err)
	}
}
