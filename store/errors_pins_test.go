package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/quotagate/limiter/store"
)

// lostFake is a plain Store (no Int64sEvaler) whose script calls lose
// their reply.
type lostFake struct {
	store.Store
	calls int
}

func (f *lostFake) EvalSha(context.Context, string, []string, []any) (any, error) {
	f.calls++
	return nil, fmt.Errorf("fake: %w", store.ErrUnknownOutcome)
}

// RunInt64s on a plain store: "The NOSCRIPT fallback and the sends after
// TRYAGAIN are Run's", and Run's "A lost reply is never retried: the
// error wraps ErrUnknownOutcome".
func TestRunInt64sPlainLostReply(t *testing.T) {
	f := &lostFake{}
	_, err := store.NewScript("return 1").RunInt64s(context.Background(), f, nil, nil, nil)
	if !errors.Is(err, store.ErrUnknownOutcome) || f.calls != 1 {
		t.Errorf("RunInt64s after a lost reply = %v (%d calls); want ErrUnknownOutcome, 1 call", err, f.calls)
	}
}
