package knownbad

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

// Hand-written designs without Lua, and how they go wrong.

// GetInsideMulti is a transaction with the GET inside it (as a
// SessionCallback that reads in the transaction): MULTI, GET, decide, EXEC. Inside MULTI the GET is only
// queued; its reply is QUEUED, never the value, so the code always sees
// "no counter yet" and writes a fresh one, SET cost PX window, on every
// call: every request is admitted and the window restarts each time.
type GetInsideMulti struct{}

// Decide implements limiter.Strategy, wrongly.
func (GetInsideMulti) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	write := !req.DryRun && req.Cost > 0
	cmds := []store.Cmd{{Name: "MULTI"}}
	for i, k := range req.Keys {
		cmds = append(cmds, store.Cmd{Name: "GET", Args: []any{k}})
		if write && req.Cost <= req.Limits[i].Rate {
			cmds = append(cmds, store.Cmd{Name: "SET", Args: []any{k, req.Cost, "PX", req.Limits[i].Period.Milliseconds()}})
		}
	}
	cmds = append(cmds, store.Cmd{Name: "EXEC"})
	rs, err := st.Do(ctx, cmds...)
	if err != nil {
		return limiter.Result{}, err
	}
	var b limiter.Binder
	allowed := true
	j := 1
	for i, l := range req.Limits {
		// The GET's reply, QUEUED, is read as "no counter".
		n, err := store.Int64(rs[j].Val)
		if err != nil {
			n = 0
		}
		j++
		if write && req.Cost <= l.Rate {
			j++
		}
		retry := time.Duration(0)
		if n+req.Cost > l.Rate || req.Cost > l.Rate {
			allowed, retry = false, l.Period
			if req.Cost > l.Rate {
				retry = -1
			}
		}
		used := n
		if write && retry == 0 {
			used += req.Cost
		}
		b.Add(i, l.Rate-used, l.Period, retry)
	}
	return b.Result(allowed), nil
}

// IncrTwoTrips is INCR-then-EXPIRE "fixed" by sending them apart: INCRBY in one round trip, then PEXPIRE in another, on every call,
// then compare. A connection lost between the two leaves a new counter
// without TTL, blocking its subject forever; the expiry moves on every call,
// so the window slides; denied requests consume.
type IncrTwoTrips struct{}

// Decide implements limiter.Strategy, wrongly.
func (IncrTwoTrips) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	return incrThenExpire(ctx, st, req, true)
}

// BucketNoTTL is the window in the key
// (key-MMddHHmm, from the app server's local clock and time zone), INCRBY,
// compare, and no TTL ("a scheduled job cleans up"). Every key is immortal;
// servers in different time zones, or with skewed clocks, count in
// different keys. The window of a limit is its Period counted from local
// midnight.
type BucketNoTTL struct {
	// Now is the app clock; nil means time.Now.
	Now func() time.Time
}

// Decide implements limiter.Strategy, wrongly.
func (s BucketNoTTL) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	now := appClock(s.Now)
	t := now().In(time.Local)
	var b limiter.Binder
	allowed := true
	for i, l := range req.Limits {
		ofDay := time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute +
			time.Duration(t.Second())*time.Second + time.Duration(t.Nanosecond())
		key := req.Keys[i] + "-" + t.Format("0102") + "-" + strconv.FormatInt(int64(ofDay/l.Period), 10)
		var n int64
		cmd := store.Cmd{Name: "INCRBY", Args: []any{key, req.Cost}}
		if req.Cost == 0 || req.DryRun {
			cmd = store.Cmd{Name: "GET", Args: []any{key}}
		}
		rs, err := st.Do(ctx, cmd)
		if err != nil {
			return limiter.Result{}, err
		}
		if n, err = store.Int64(rs[0].Val); err != nil && !errors.Is(err, store.ErrNil) {
			return limiter.Result{}, err
		}
		if cmd.Name == "GET" {
			n += req.Cost
		}
		retry := time.Duration(0)
		if n > l.Rate {
			allowed, retry = false, l.Period
			if req.Cost > l.Rate {
				retry = -1
			}
		}
		b.Add(i, l.Rate-n, l.Period, retry)
	}
	return b.Result(allowed), nil
}

// AppClockBucket is time-bucketed keys done almost right: MULTI, INCRBY,
// PEXPIREAT of the window's end, EXEC, and a denied request taken back;
// but the window comes from the app server's clock alone, never aligned to
// Redis TIME (a getDate() on the app server). App servers whose clocks differ count
// in different windows, so together they admit a multiple of the limit,
// and a key whose window the app clock thinks current may already be past
// its expiry on the server.
type AppClockBucket struct {
	// Now is the app clock; nil means time.Now.
	Now func() time.Time
}

// Decide implements limiter.Strategy, wrongly.
func (s AppClockBucket) Decide(ctx context.Context, st store.Store, req limiter.Request) (limiter.Result, error) {
	now := appClock(s.Now)
	ms := now().UnixMilli()
	keys := make([]string, len(req.Keys))
	ends := make([]int64, len(req.Keys))
	for i, l := range req.Limits {
		p := l.Period.Milliseconds()
		keys[i] = req.Keys[i] + ":" + strconv.FormatInt(ms/p, 10)
		ends[i] = (ms/p + 1) * p
	}
	txn := func(name string, cost int64) ([]any, error) {
		cmds := []store.Cmd{{Name: "MULTI"}}
		for i, k := range keys {
			cmds = append(cmds, store.Cmd{Name: name, Args: []any{k, cost}},
				store.Cmd{Name: "PEXPIREAT", Args: []any{k, ends[i] + min(time.Second, req.Limits[i].Period).Milliseconds()}})
		}
		cmds = append(cmds, store.Cmd{Name: "EXEC"})
		rs, err := st.Do(ctx, cmds...)
		if err != nil {
			return nil, err
		}
		return store.Slice(rs[len(rs)-1].Val)
	}
	var b limiter.Binder
	allowed := true
	counts := make([]int64, len(keys))
	if req.Cost == 0 || req.DryRun || req.Cost > minRate(req.Limits) {
		for i, k := range keys {
			rs, err := st.Do(ctx, store.Cmd{Name: "GET", Args: []any{k}})
			if err != nil {
				return limiter.Result{}, err
			}
			counts[i], _ = store.Int64(rs[0].Val)
			counts[i] += req.Cost
		}
	} else {
		vals, err := txn("INCRBY", req.Cost)
		if err != nil {
			return limiter.Result{}, err
		}
		for i := range keys {
			if counts[i], err = store.Int64(vals[2*i]); err != nil {
				return limiter.Result{}, err
			}
		}
	}
	for i, l := range req.Limits {
		if counts[i] > l.Rate {
			allowed = false
		}
	}
	if !allowed && req.Cost > 0 && !req.DryRun && req.Cost <= minRate(req.Limits) {
		if _, err := txn("DECRBY", req.Cost); err != nil {
			return limiter.Result{}, err
		}
	}
	for i, l := range req.Limits {
		reset := time.Duration(max(ends[i]-ms, 1)) * time.Millisecond
		retry := time.Duration(0)
		switch {
		case req.Cost > l.Rate:
			retry = -1
		case counts[i] > l.Rate:
			retry = reset
		}
		used := counts[i]
		if !allowed {
			used -= req.Cost
		}
		b.Add(i, l.Rate-used, reset, retry)
	}
	return b.Result(allowed), nil
}

func minRate(ls []limiter.Limit) int64 {
	m := ls[0].Rate
	for _, l := range ls[1:] {
		m = min(m, l.Rate)
	}
	return m
}

// appClock returns now, or time.Now when now is nil.
func appClock(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}
