package rueidis_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/quotagate/limiter/internal/redistest"
	"github.com/quotagate/limiter/store"
)

// TestInt64sRESP3Booleans: store.Int64sEvaler is "EvalSha with
// integer arguments and reply". A script that opts into RESP3 replies
// (redis.setresp(3)) and returns a Lua boolean reaches rueidis, which
// speaks RESP3, as a RESP3 boolean. The generic path (EvalSha, value())
// normalises it to int64 1/0, and so does every other adapter; the
// adapter's own Int64sEvaler path (appendInts: AsInt64 / ToArray) fails
// on it. Script.RunInt64s thus answers differently on the same store
// depending on which path it takes.
func TestInt64sRESP3Booleans(t *testing.T) {
	st := newStore(t, redistest.StartServer(t).Addr(), nil)
	generic := struct{ store.Store }{st} // hides Int64sEvaler
	ctx := context.Background()
	for _, src := range []string{
		"redis.setresp(3); return {7, true, false}",
		"redis.setresp(3); return true",
	} {
		s := store.NewScript(src)
		want, err := s.RunInt64s(ctx, generic, nil, nil, nil)
		if err != nil {
			t.Fatalf("%q through the generic path: %v", src, err)
		}
		got, err := s.RunInt64s(ctx, st, nil, nil, nil)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q through Int64sEvaler = %v, %v; the generic path gives %v", src, got, err, want)
		}
	}
}
