package ctxend

import (
	"context"
	"errors"
	"testing"
	"time"
)

// pastDeadline is a context whose deadline has passed while its Err is
// still nil (its timer late).
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

func TestErr(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"live", context.Background(), nil},
		{"canceled", canceled, context.Canceled},
		{"deadline passed, timer late", pastDeadline{context.Background()}, context.DeadlineExceeded},
	} {
		if err := Err(c.ctx); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: %v; want %v", c.name, err, c.want)
		}
	}
}
