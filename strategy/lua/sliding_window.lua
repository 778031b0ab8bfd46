-- Sliding window counter, several limits decided at once, all or nothing,
-- on the server's clock, in integers only.
--
-- KEYS[i]        state of limit i (all keys in one Cluster slot), below
-- ARGV[1]        cost, >= 0
-- ARGV[2]        "1": decide but write nothing (peek); "0": decide and write
-- ARGV[1+2i]     rate R of limit i, below 2^26
-- ARGV[2+2i]     period P of limit i, in milliseconds (R * P <= 2^51)
-- or, for a cost of 1 written (the common call: each argument costs the
-- server time), the limits' arguments alone: ARGV[2i-1] and ARGV[2i]
--
-- A window starts with the first request of an idle limit and lasts P;
-- the next one starts where it ends. At e milliseconds into a window the
-- previous window's count weighs (P - e) / P, so a request of cost n is
-- admitted when
--     (count + n) * P + previous * (P - e) <= R * P,
-- compared in integers (every product below 2^53).
--
-- The state of a limit is one integer, previous * 2^27 + count (each below
-- 2^26, so below 2^53), and the key's expiry, which is the clock: the key
-- expires when the weighted count is zero, at the end of the window after
-- the current one while the current window counts anything (count > 0),
-- else at the end of the current window. So its PTTL d tells how far into
-- its window the limit is, e = 2P - d (count > 0) or e = P - d, and the
-- common call is FixedWindow's: INCR (INCRBY for another cost), which
-- refuses a key that is not a string or not an integer before writing,
-- and PTTL, the count taken back when over. A window that ended since (e
-- >= P) makes its count the previous one when a count starts in the next
-- (one SET; in the key's own expiry millisecond, PTTL 0 with a count, e =
-- 2P: the next window ended too, and the limit is idle); a count that starts in a window moves the expiry to the end of
-- the next one (one PEXPIRE). A window that ended is not written back on
-- its own: its state, as it was, reads the same.
--
-- Returns {allowed, remaining_1, reset_ms_1, retry_ms_1, remaining_2, ...}
-- (for one limit that admits, reset_ms * (R + 1) + remaining as one
-- integer when that is below 2^52):
-- remaining is the cost that fits after the decision; reset_ms the time
-- until the weighted count is zero (0 when it is); retry_ms is 0 for a
-- limit that admits, -1 when the cost can never fit (cost > R), else the
-- wait until it would fit (at least 1).
--
-- A key that is not a string (WRONGTYPE) or whose value is not a decimal
-- integer as INCRBY reads it (no sign, spaces, fraction, exponent or
-- leading zero), at most 2^53 - 1, whose count is below 2^26, is an error,
-- and the call leaves every key as it found it. A key found without a TTL
-- (a leak from elsewhere), or with one beyond its window (the limit's
-- period was shortened), is read as a window that starts now, its counts
-- kept, and a writing call gives it its expiry.

-- The globals the common call reads, read once: each read of a global is
-- a table lookup, paid again at every use (about 120 instructions).
local KEYS, ARGV, redis = KEYS, ARGV, redis
local M, MAXC = 134217728, 67108864 -- 2^27, 2^26
local n = #KEYS
-- o: where the limits' arguments start (ARGV[o + 2i - 1], ARGV[o + 2i])
local o, cost, costarg, write = 0, 1, '1', true
if #ARGV ~= 2 * n then
  o, costarg = 2, ARGV[1]
  cost = tonumber(costarg)
  write = ARGV[2] == '0' and cost > 0
end

-- The common call, one limit that writes a cost it can fit, counts first
-- and asks questions after. Anything unusual (a key without a TTL or with
-- one beyond its window) is taken back and left to the general path. (No
-- functions before it: each definition costs every call a closure.) An
-- admission replies {1, remaining, reset_ms, 0} as one integer when it
-- fits below 2^52 (no table to build): reset_ms * (R + 1) + remaining; a
-- denial's reply is built below, from dc, dp, de.
local rate = n == 1 and write and ARGV[o + 1] + 0
local dc, dp, de, dperiod
if rate and cost <= rate and rate < MAXC then
  local key = KEYS[1]
  local period = ARGV[o + 2] + 0
  local v
  if o == 0 then
    v = redis.call('INCR', key)
  else
    v = redis.call('INCRBY', key, costarg)
  end
  local c = v % M
  local before = c - cost
  if v < cost or v > 9007199254740991 or before < 0 or before >= MAXC then
    -- negative, beyond 2^53 - 1 or a count of 2^26 or more before this
    -- call: not a state
    redis.call('DECRBY', key, costarg)
    return redis.error_reply('ERR limiter corrupt counter: the key of limit 1 holds no sliding window')
  end
  local p = (v - c) / M
  if v == cost then
    -- a new limit (or one that held 0): its window starts now
    redis.call('PEXPIRE', key, string.format('%d', 2 * period))
    local v = 2 * period * (rate + 1) + rate - cost
    if v < 4503599627370496 then
      return v
    end
    return {1, rate - cost, 2 * period, 0}
  end
  local d = redis.call('PTTL', key)
  local e = period - d
  if before > 0 then
    e = e + period
  end
  if d >= 0 and e >= 0 then
    local ok
    if e >= period then
      -- the window ended: its count is the previous one, and this cost
      -- the first of the next window
      -- (one assignment each: gopher-lua, miniredis' Lua, may assign a
      -- multiple assignment's targets before it reads all its values)
      p = before
      c = cost
      e = e - period
      if e >= period then
        -- the key's own expiry millisecond (PTTL 0, e = 2P, the key not
        -- yet gone): the next window ended too, counting nothing, and
        -- this cost is the first of a new one
        p = 0
        e = 0
      end
      ok = c * period + p * (period - e) <= rate * period
      if ok then
        redis.call('SET', key, string.format('%d', p * M + c), 'PX', string.format('%d', 2 * period - e))
      else
        -- denied: the state as it was describes the same (its expiry is
        -- the end of the window its count weighs in)
        c = 0
      end
    else
      ok = c * period + p * (period - e) <= rate * period
      if ok and before == 0 then
        -- the first count of this window: the key lives until the end of
        -- the next one
        redis.call('PEXPIRE', key, string.format('%d', 2 * period - e))
      elseif not ok then
        c = before
      end
    end
    if ok then
      local r = rate * period - c * period - p * (period - e)
      r = (r - r % period) / period
      local v = (2 * period - e) * (rate + 1) + r
      if v < 4503599627370496 then
        return v
      end
      return {1, r, 2 * period - e, 0}
    end
    redis.call('DECRBY', key, costarg)
    dc, dp, de, dperiod = c, p, e, period
  else
    redis.call('DECRBY', key, costarg)
  end
end

-- floor(a / b) of non-negative integers, exact
local function div(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  end
  return q
end

-- the cost that fits, the time until the weighted count is zero and the
-- wait until cost fits (0: it does), for count c, previous p, e ms into
-- the window; added: whether c already includes cost (admitted, written)
local function answer(rate, period, c, p, e, added)
  local retry = 0
  local before = c
  if added then
    before = c - cost
  end
  if cost > rate then
    retry = -1
  elseif before + cost > rate then
    -- fits in the next window once the count carried into it weighs
    -- little enough: c * (P - e') <= (R - cost) * P
    retry = period - e + math.max(period - div((rate - cost) * period, before), 0)
  elseif (before + cost) * period + p * (period - e) > rate * period then
    -- fits later in this window: p * (P - e') <= (R - c - cost) * P
    retry = period - div((rate - before - cost) * period, p) - e
  end
  if retry > 0 then
    retry = math.max(retry, 1)
  end
  local reset = 0
  if c > 0 then
    reset = 2 * period - e
  elseif p > 0 then
    reset = period - e
  end
  return math.max(div(math.max(rate * period - c * period - p * (period - e), 0), period), 0), reset, retry
end

local function corrupt(i)
  return redis.error_reply('ERR limiter corrupt counter: the key of limit ' .. i .. ' holds no sliding window')
end

if dc then
  local remaining, reset, retry = answer(rate, dperiod, dc, dp, de, false)
  return {0, remaining, reset, retry}
end

-- The general path: several limits, a peek, a cost of 0 or above a rate,
-- a key without a TTL or with one beyond its window. Every state is read
-- and checked before anything is written.
-- moved: the key's expiry is to be written (no key, a count that starts in
-- a window, a window that ended, a repair); else an admission adds its cost
-- with INCRBY, the expiry as it was
-- late[i]: for a call that writes nothing, the milliseconds until the
-- window it read as starting now does start (see below)
local counts, prevs, es, exists, repair, moved, late = {}, {}, {}, {}, {}, {}, {}
local allowed = 1
for i = 1, n do
  local rate, period = tonumber(ARGV[o - 1 + 2 * i]), tonumber(ARGV[o + 2 * i])
  if rate >= MAXC then
    return redis.error_reply('ERR limiter: the rate of limit ' .. i .. ' is 2^26 or more')
  end
  local c, p, e = 0, 0, 0
  local v = redis.call('GET', KEYS[i])
  if v then
    -- (checked before it is converted: miniredis's Lua reads a leading
    -- zero as octal)
    if not (#v <= 16 and (v == '0' or string.match(v, '^[1-9]%d*$'))) then
      return corrupt(i)
    end
    local x = v + 0
    c = x % M
    if x > 9007199254740991 or c >= MAXC then
      return corrupt(i)
    end
    p = (x - c) / M
    exists[i] = true
    local d = redis.call('PTTL', KEYS[i])
    e = period - d
    if c > 0 then
      e = e + period
    end
    if c == 0 and p == 0 then
      e = 0
    elseif d < 0 or e < 0 then
      -- no TTL, or one beyond its window: the window starts now. (A call
      -- that writes nothing reports it as it is: no write moves its
      -- expiry, so its counts stand until its TTL comes within the
      -- windows they count in, -e ms from now, where the window starts.)
      if not write and d >= 0 then
        late[i] = -e
      end
      e = 0
      repair[i] = true
    elseif e >= 2 * period then
      -- the key's own expiry millisecond (PTTL 0 with a count, the key
      -- not yet gone): both windows ended, the limit is idle
      c = 0
      p = 0
      e = 0
    elseif e >= period then
      p = c
      c = 0
      e = e - period
    end
  end
  moved[i] = c == 0 or repair[i]
  counts[i], prevs[i], es[i] = c, p, e
  if cost > rate or (c + cost) * period + p * (period - e) > rate * period then
    allowed = 0
  end
end

local out = {allowed}
for i = 1, n do
  local rate, period = tonumber(ARGV[o - 1 + 2 * i]), tonumber(ARGV[o + 2 * i])
  local c, p, e = counts[i], prevs[i], es[i]
  local added = allowed == 1 and write
  if added then
    c = c + cost
    if moved[i] then
      redis.call('SET', KEYS[i], string.format('%d', p * M + c), 'PX', string.format('%d', 2 * period - e))
    else
      redis.call('INCRBY', KEYS[i], costarg)
    end
  elseif write and exists[i] then
    -- a denial keeps the state (as read, it is the same), but gives one
    -- found without its expiry, or with a longer one, its own
    if c == 0 and p == 0 then
      redis.call('DEL', KEYS[i])
    elseif repair[i] then
      local ttl = period - e
      if c > 0 then
        ttl = ttl + period
      end
      redis.call('SET', KEYS[i], string.format('%d', p * M + c), 'PX', string.format('%d', ttl))
    end
  end
  local remaining, reset, retry = answer(rate, period, c, p, e, added)
  if late[i] then
    if retry > 0 then
      retry = retry + late[i]
    end
    if reset > 0 then
      reset = reset + late[i]
    end
  end
  out[#out + 1] = remaining
  out[#out + 1] = reset
  out[#out + 1] = retry
end
return out
