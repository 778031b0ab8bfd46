package ctxend

import (
	"context"
	"time"
)

// Err returns ctx's error, or context.DeadlineExceeded once ctx's deadline
// has passed: a timer set from the deadline (a socket's read deadline, a
// client's own) may fire a moment before ctx's, and a call it failed then
// ended with ctx, though ctx.Err is still nil.
func Err(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}
