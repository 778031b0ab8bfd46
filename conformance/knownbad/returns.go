package knownbad

import (
	"context"
	"fmt"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
	"github.com/quotagate/limiter/strategy"
)

// BlindReturn is FixedWindow with the hand-written give-back of a quota
// lease's unused units: DECRBY on whatever counter holds the key when the
// units come back, without asking whether it is still the window they
// were counted in. A window deleted and counted anew meanwhile gets units
// it never counted, and admits them on top of its rate.
type BlindReturn struct{ strategy.FixedWindow }

// WindowEnd reports any positive end and the counter's PTTL.
func (BlindReturn) WindowEnd(ctx context.Context, st store.Store, req limiter.Request) (int64, time.Duration, error) {
	rs, err := st.Do(ctx, store.Cmd{Name: "PTTL", Args: []any{req.Keys[0]}})
	if err != nil {
		return 0, 0, err
	}
	p, err := store.Int64(rs[0].Val)
	if err != nil || p <= 0 {
		return 0, 0, err
	}
	return 1, time.Duration(p) * time.Millisecond, nil
}

// ReturnQuota takes the units off the counter, whichever window it is.
func (BlindReturn) ReturnQuota(ctx context.Context, st store.Store, req limiter.Request, _ int64) (bool, error) {
	rs, err := st.Do(ctx, store.Cmd{Name: "DECRBY", Args: []any{req.Keys[0], req.Cost}})
	if err != nil {
		return false, err
	}
	if rs[0].Err != nil {
		return false, fmt.Errorf("knownbad: DECRBY: %w", rs[0].Err)
	}
	return true, nil
}

// BlindBucketReturn is Bucketed with the hand-written give-back for
// time-bucketed keys: DECRBY on the bucket of the server's current window,
// whichever window the units were counted in, and whether or not its key
// still counts them. Units leased in a window that has ended go to the
// next one, and a bucket deleted meanwhile is re-created below 0, to admit
// them on top of its rate.
type BlindBucketReturn struct{ *strategy.Bucketed }

// ReturnQuota takes the units off the bucket of the server's current window.
func (b BlindBucketReturn) ReturnQuota(ctx context.Context, st store.Store, req limiter.Request, _ int64) (bool, error) {
	rs, err := st.Do(ctx, store.Cmd{Name: "TIME"})
	if err != nil {
		return false, err
	}
	t, err := store.Int64s(rs[0].Val)
	if err != nil || len(t) != 2 {
		return false, fmt.Errorf("knownbad: TIME: %v %v", rs[0].Val, err)
	}
	idx := t[0] * 1000 / req.Limits[0].Period.Milliseconds()
	key := fmt.Sprintf("%s:%d", req.Keys[0], idx)
	rs, err = st.Do(ctx, store.Cmd{Name: "DECRBY", Args: []any{key, req.Cost}})
	if err != nil {
		return false, err
	}
	if rs[0].Err != nil {
		return false, fmt.Errorf("knownbad: DECRBY: %w", rs[0].Err)
	}
	return true, nil
}
