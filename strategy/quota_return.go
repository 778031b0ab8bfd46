package strategy

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/quotagate/limiter"
	"github.com/quotagate/limiter/store"
)

//go:embed lua/quota_return.lua
var quotaReturnLua string

var quotaReturnScript = store.NewScript(quotaReturnLua)

// QuotaReturnScript returns the script FixedWindow gives leased units back
// with (limiter.QuotaReturner), for tools that preload it (SCRIPT LOAD).
func QuotaReturnScript() *store.Script { return quotaReturnScript }

// WindowEnd implements limiter.QuotaReturner: the counter's expiry is its
// window's end.
func (FixedWindow) WindowEnd(ctx context.Context, st store.Store, req limiter.Request) (int64, time.Duration, error) {
	return windowEnd(ctx, st, req.Keys[0])
}

// ReturnQuota implements limiter.QuotaReturner: units come off the counter
// only while its window is the one that ends at end.
func (FixedWindow) ReturnQuota(ctx context.Context, st store.Store, req limiter.Request, end int64) (bool, error) {
	return returnQuota(ctx, st, req.Keys[0], req.Cost, end)
}

// windowEnd reads the end of the fixed window counted at key.
func windowEnd(ctx context.Context, st store.Store, key string) (int64, time.Duration, error) {
	var dst [2]int64
	nums, err := quotaReturnScript.RunInt64s(ctx, st, []string{key}, []int64{0}, dst[:0])
	if err != nil {
		return 0, 0, fmt.Errorf("strategy: window end: %w", err)
	}
	if len(nums) != 2 || nums[0] < 0 {
		return 0, 0, fmt.Errorf("strategy: window end: bad reply %v", nums)
	}
	if nums[0] == 0 || nums[1] < 0 {
		return 0, 0, nil
	}
	return nums[0], time.Duration(nums[1]) * time.Millisecond, nil
}

// returnQuota gives units back to the fixed window counted at key that
// ends at end, if it still does.
func returnQuota(ctx context.Context, st store.Store, key string, units, end int64) (bool, error) {
	if units <= 0 || end <= 0 {
		return false, nil
	}
	var dst [1]int64
	nums, err := quotaReturnScript.RunInt64s(ctx, st, []string{key}, []int64{1, units, end}, dst[:0])
	if err != nil {
		return false, fmt.Errorf("strategy: quota return: %w", corruptErr(err))
	}
	if len(nums) != 1 {
		return false, fmt.Errorf("strategy: quota return: bad reply %v", nums)
	}
	return nums[0] == 1, nil
}

// WindowEnd implements limiter.QuotaReturner without Lua: the counter's
// PEXPIRETIME (Redis 7.0 and later; on an older server the end reads as
// 0, and leases are not given back).
func (o *Optimistic) WindowEnd(ctx context.Context, st store.Store, req limiter.Request) (int64, time.Duration, error) {
	key := req.Keys[0]
	rs, err := st.Do(ctx, store.Cmd{Name: "PEXPIRETIME", Args: []any{key}}, store.Cmd{Name: "PTTL", Args: []any{key}})
	if err != nil {
		return 0, 0, fmt.Errorf("strategy: optimistic: window end: %w", err)
	}
	if len(rs) != 2 || rs[0].Err != nil || rs[1].Err != nil {
		return 0, 0, nil
	}
	end, err1 := store.Int64(rs[0].Val)
	left, err2 := store.Int64(rs[1].Val)
	if err1 != nil || err2 != nil || end <= 0 || left < 0 {
		return 0, 0, nil
	}
	return end, time.Duration(left) * time.Millisecond, nil
}

// ReturnQuota implements limiter.QuotaReturner without Lua: WATCH the
// counter, read its end and count, and DECRBY in MULTI/EXEC when the window
// is the one that ends at end (within 2 ms, as the script) and counts at
// least units. A write by anyone in between aborts it, and it is tried
// again, up to 3 times in all: the units are then not given back (reported
// false), never given to another window.
func (o *Optimistic) ReturnQuota(ctx context.Context, st store.Store, req limiter.Request, end int64) (bool, error) {
	key, units := req.Keys[0], req.Cost
	if units <= 0 || end <= 0 {
		return false, nil
	}
	inWindow := func(v any) (bool, error) {
		e, err := store.Int64(v)
		return err == nil && e > 0 && e >= end-2 && e <= end+2, nil
	}
	ok, err := watchedReturn(ctx, st, key, units, store.Cmd{Name: "PEXPIRETIME", Args: []any{key}}, inWindow, parseCounter,
		store.Cmd{Name: "DECRBY", Args: []any{key, units}})
	if err != nil {
		return false, fmt.Errorf("strategy: optimistic: quota return: %w", err)
	}
	return ok, nil
}

// returnAttempts bounds the WATCH transactions of a quota return without
// Lua: a write to the counter between its read and EXEC (another process
// counting on it) aborts one, and the next reads the counter anew.
const returnAttempts = 3

// retryAborted runs watch until it is not aborted by a write to a watched
// key, at most returnAttempts times, and returns its last error.
func retryAborted(watch func() error) error {
	var err error
	for range returnAttempts {
		if err = watch(); !errors.Is(err, store.ErrTxAborted) {
			break
		}
	}
	return err
}

// watchedReturn takes units off the counter at key without Lua: it WATCHes
// key, reads probe and the counter, and runs exec in MULTI/EXEC when
// inWindow (given probe's reply) says the counter is still the window's
// and count (given the counter) at least units; a transaction a write to
// key aborts is tried again (retryAborted). It reports whether exec ran.
func watchedReturn(ctx context.Context, st store.Store, key string, units int64, probe store.Cmd, inWindow func(any) (bool, error), count func(any) (int64, error), exec ...store.Cmd) (bool, error) {
	w, ok := st.(store.Watcher)
	if !ok {
		return false, fmt.Errorf("store %T: %w", st, ErrNoWatcher)
	}
	var done bool
	err := retryAborted(func() error {
		return w.Watch(ctx, []string{key}, func(tx store.Tx) error {
			rs, err := tx.Do(ctx, probe, store.Cmd{Name: "GET", Args: []any{key}})
			if err != nil {
				return err
			}
			if len(rs) != 2 || rs[0].Err != nil || errors.Is(rs[1].Err, store.ErrNil) {
				return nil
			}
			if rs[1].Err != nil {
				return fmt.Errorf("GET %s: %w", key, corruptErr(rs[1].Err))
			}
			if open, err := inWindow(rs[0].Val); err != nil || !open {
				return err
			}
			n, err := count(rs[1].Val)
			if err != nil {
				return fmt.Errorf("GET %s: %w", key, err)
			}
			if n < units {
				return nil
			}
			out, err := tx.Exec(ctx, exec...)
			if err != nil {
				return err
			}
			for i, r := range out {
				if r.Err != nil {
					return fmt.Errorf("%s %s: %w", exec[i].Name, key, r.Err)
				}
			}
			if len(out) != len(exec) {
				return fmt.Errorf("%d replies for %d commands", len(out), len(exec))
			}
			done = true
			return nil
		})
	})
	if errors.Is(err, store.ErrTxAborted) {
		return false, nil
	}
	return done, err
}

// WindowEnd implements limiter.QuotaReturner without Lua: a window is
// named by its index, so its end is (index+1)·Period. One transaction
// (MULTI, TIME, GET of the window's counter, EXEC) reads the server's
// clock and the counter of the window the app clock names; the end is 0
// when the server's clock names another window (a call racing a window's
// end) or the counter holds nothing.
func (b *Bucketed) WindowEnd(ctx context.Context, st store.Store, req limiter.Request) (int64, time.Duration, error) {
	c := b.clockFor(st)
	est, t0, err := b.serverNowAt(ctx, st, c)
	if err != nil {
		return 0, 0, err
	}
	p := req.Limits[0].Period.Milliseconds()
	idx := est / 1000 / p
	key := bucketKey(req.Keys[0], idx)
	vals, err := execReply(ctx, st, []store.Cmd{{Name: "MULTI"}, {Name: "TIME"}, {Name: "GET", Args: []any{key}}, {Name: "EXEC"}})
	t1 := b.now()
	if err != nil {
		return 0, 0, fmt.Errorf("strategy: bucketed: window end: %w", err)
	}
	now, err := parseTime(vals[0])
	if err != nil {
		return 0, 0, err
	}
	c.observe(t0, t1, now)
	if now/1000/p != idx || vals[1] == nil {
		return 0, 0, nil
	}
	if n, err := parseRedisInt(vals[1]); err != nil || n <= 0 {
		return 0, 0, nil
	}
	end := (idx + 1) * p
	return end, time.Duration(end-now/1000) * time.Millisecond, nil
}

// ReturnQuota implements limiter.QuotaReturner without Lua: WATCH the
// counter of the window that ends at end (named by its index), read the
// server's clock and the count, and DECRBY in MULTI/EXEC (with the key's
// PEXPIREAT, so that a key is never left without its expiry) while the
// window has more than 2 ms left and counts at least units. A write by
// anyone in between aborts it, and it is tried again, up to 3 times in
// all: the units are then not given back (reported false). A window's key
// names the window, so units never reach another window; a window deleted
// (a Reset, an eviction) and counted anew within the same window cannot be
// told from it, and may get the units.
func (b *Bucketed) ReturnQuota(ctx context.Context, st store.Store, req limiter.Request, end int64) (bool, error) {
	l, units := req.Limits[0], req.Cost
	p := l.Period.Milliseconds()
	if units <= 0 || end <= 0 || end%p != 0 {
		return false, nil
	}
	idx := end/p - 1
	key := bucketKey(req.Keys[0], idx)
	inWindow := func(v any) (bool, error) {
		now, err := parseTime(v)
		// not when the window has ended, or is about to
		return err == nil && now/1000 < end-2, err
	}
	// (a counter below 0 after a take-back met a deleted key counts nothing)
	ok, err := watchedReturn(ctx, st, key, units, store.Cmd{Name: "TIME"}, inWindow, parseRedisInt,
		store.Cmd{Name: "DECRBY", Args: []any{key, units}},
		store.Cmd{Name: "PEXPIREAT", Args: []any{key, b.expireAt(l, idx)}})
	if err != nil {
		return false, fmt.Errorf("strategy: bucketed: quota return: %w", err)
	}
	return ok, nil
}
