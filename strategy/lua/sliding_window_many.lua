-- Several requests decided in one call, each as sliding_window.lua
-- decides it on its own: the code of sliding_window.lua, verbatim, is
-- the function decide below, run for each request in turn. (This file
-- is generated from that script: go test ./strategy -run
-- TestManyScripts -update.)
--
-- KEYS           the requests' keys, one request's after another's
-- ARGV           for each request in turn: its number of keys, its number
--                of arguments, then its arguments as sliding_window.lua
--                reads them; or its number of keys and -1, when its
--                arguments are those of the request before it (sent once)
--
-- Returns one element per request: sliding_window.lua's reply to it,
-- or the error it ends with (as an error reply in the array). A
-- request's error leaves what it wrote, as the script alone does, and the
-- requests after it are decided.

local function decide(KEYS, ARGV)
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
end

-- The tables decide reads as KEYS and ARGV are reused from request to
-- request (cut to the request's length; decide never writes to them), and
-- the counts are read by an addition, cheaper than tonumber: this loop's
-- cost is paid per request.
local keys, argv, out = KEYS, ARGV, {}
local k, a, n, j = 0, 1, #ARGV, 0
local ks, as, kn, an = {}, {}, 0, 0
while a <= n do
  local nk, na = argv[a] + 0, argv[a + 1] + 0
  for i = 1, nk do
    ks[i] = keys[k + i]
  end
  for i = nk + 1, kn do
    ks[i] = nil
  end
  k, a, kn = k + nk, a + 2, nk
  if na >= 0 then
    for i = 1, na do
      as[i] = argv[a - 1 + i]
    end
    for i = na + 1, an do
      as[i] = nil
    end
    a, an = a + na, na
  end
  local ok, r = pcall(decide, ks, as)
  if not ok and type(r) ~= 'table' then
    r = {err = tostring(r)} -- a Lua error, not a Redis one
  elseif r == nil then
    r = false -- a nil reply, kept in its place
  end
  j = j + 1
  out[j] = r
end
return out
