package knownbad

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// CallerCtxTakeBack counts first and takes a denial back after: MULTI,
// SET NX of an empty window, INCRBY and PTTL of every limit's key, EXEC;
// over any rate, a DECRBY of every key in a second round trip, sent under
// the caller's context. A client that goes away (a deadline, a cancelled
// request) between the two round trips leaves the denied cost counted: the
// subject loses quota to requests it was refused, and is locked out early.
// Only the calls that OneLimit names count so (those of one limit, or of
// several); the others, and every call that writes nothing, are decided by
// the correct Strategy wrapped, on the same keys.
type CallerCtxTakeBack struct {
	Strategy limiter.Strategy // the correct strategy wrapped
	OneLimit bool             // true: calls of one limit count first; false: calls of several
}

// Decide implements limiter.Strategy, wrongly.
func (s CallerCtxTakeBack) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	if (len(req.Limits) == 1) != s.OneLimit || req.DryRun || req.Cost <= 0 || req.Cost > minRate(req.Limits) {
		return s.Strategy.Decide(ctx, st, req)
	}
	cmds := []store.Cmd{{Name: "MULTI"}}
	for i, k := range req.Keys {
		cmds = append(cmds,
			store.Cmd{Name: "SET", Args: []any{k, 0, "PX", req.Limits[i].Period.Milliseconds(), "NX"}},
			store.Cmd{Name: "INCRBY", Args: []any{k, req.Cost}},
			store.Cmd{Name: "PTTL", Args: []any{k}})
	}
	cmds = append(cmds, store.Cmd{Name: "EXEC"})
	rs, err := st.Do(ctx, cmds...)
	if err != nil {
		return limiter.Result{}, err
	}
	vals, err := store.Slice(rs[len(rs)-1].Val)
	if err != nil || len(vals) != 3*len(req.Keys) {
		return limiter.Result{}, fmt.Errorf("knownbad: EXEC: %v %v", rs[len(rs)-1].Err, err)
	}
	counts := make([]int64, len(req.Keys))
	ttls := make([]time.Duration, len(req.Keys))
	allowed := true
	for i, l := range req.Limits {
		if e, ok := vals[3*i+1].(error); ok {
			if strings.Contains(e.Error(), "WRONGTYPE") || strings.Contains(e.Error(), "not an integer") {
				return limiter.Result{}, fmt.Errorf("knownbad: %w: %w", limiter.ErrCorruptCounter, e)
			}
			return limiter.Result{}, e
		}
		if counts[i], err = store.Int64(vals[3*i+1]); err != nil {
			return limiter.Result{}, err
		}
		p, _ := store.Int64(vals[3*i+2])
		ttls[i] = time.Duration(max(p, 1)) * time.Millisecond
		if counts[i] > l.Rate {
			allowed = false
		}
	}
	if !allowed {
		// the take-back, under the caller's context
		back := make([]store.Cmd, len(req.Keys))
		for i, k := range req.Keys {
			back[i] = store.Cmd{Name: "DECRBY", Args: []any{k, req.Cost}}
		}
		if _, err := st.Do(ctx, back...); err != nil {
			return limiter.Result{}, err
		}
	}
	var b limiter.Binder
	for i, l := range req.Limits {
		used, retry := counts[i], time.Duration(0)
		if !allowed {
			used -= req.Cost
		}
		if counts[i] > l.Rate {
			retry = ttls[i]
		}
		b.Add(i, l.Rate-used, ttls[i], retry)
	}
	return b.Result(allowed), nil
}
