package strategy_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/quotagate/limiter"
)

// A TAT in microseconds since the Unix epoch (earlier releases' form),
// found without a TTL under a limit of whole milliseconds, is read rounded
// up to the millisecond, as the key's expiry would have held it: 150.5 ms
// ahead is full again in 151 ms (not 150: the limit would refill early),
// and an admission writes a TAT 251 ms ahead.
func TestGCRAEpochFormWithoutTTLRoundsUp(t *testing.T) {
	rdb, lim, now := gcraOnMini(t)
	ctx := context.Background()
	l := limiter.PerSecond(10) // 100 000 µs: whole milliseconds
	key, _ := limiter.Key("t", "e", l)
	tat := now.UnixMicro() + 150_500
	if err := rdb.Set(ctx, key, strconv.FormatInt(tat, 10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	r, err := lim.Peek(ctx, "e", l)
	if err != nil || !r.Allowed || r.Remaining != 8 || r.ResetAfter != 151*time.Millisecond {
		t.Errorf("Peek: %+v, %v; want allowed, 8 remaining, full again in 151ms", r, err)
	}
	r, err = lim.Allow(ctx, "e", l)
	if err != nil || !r.Allowed || r.Remaining != 7 || r.ResetAfter != 251*time.Millisecond {
		t.Errorf("Allow: %+v, %v; want admitted, 7 remaining, full again in 251ms", r, err)
	}
	if d := rdb.PTTL(ctx, key).Val(); d != 251*time.Millisecond {
		t.Errorf("PTTL %s after the admission; want 251ms", d)
	}
}
