-- Fixed window counter, several limits decided at once, all or nothing.
--
-- KEYS[i]        counter of limit i (all keys in one Cluster slot)
-- ARGV[1]        cost, >= 0
-- ARGV[2]        "1": decide but write nothing (peek); "0": decide and write
-- ARGV[1+2i]     rate of limit i
-- ARGV[2+2i]     window of limit i, in milliseconds
-- or, for a cost of 1 written (the common call: each argument costs the
-- server time), the limits' arguments alone:
-- ARGV[2i-1]     rate of limit i
-- ARGV[2i]       window of limit i, in milliseconds
--
-- Returns {allowed, remaining_1, reset_ms_1, retry_ms_1, remaining_2, ...}
-- for a peek, a cost of 0 or a cost above a rate; a call that writes a cost
-- every limit can fit gets the shorter {count_1, reset_ms_1, ...} below
-- (with one limit, an integer when it fits):
-- allowed is 1 or 0 (for a peek: whether the cost would be admitted);
-- remaining is after the decision; reset_ms is at least 1; retry_ms is 0 for
-- a limit that admits, -1 when the cost can never fit, else the wait until
-- the window resets (at least 1).
--
-- A window starts when its counter is created (SET ... PX) and ends when the
-- key expires: the expiry is set once per window, never moved later, so the
-- window never slides. Redis keeps a key through the millisecond its expiry
-- names (PTTL 0): that millisecond belongs to the next window, so a call
-- that finds PTTL 0 starts it (SET over the old counter), and a denial's
-- RetryAfter, the PTTL, is exact. A writing call (not a peek, cost > 0) repairs a
-- counter found without a TTL (a leak from elsewhere), or with one longer
-- than its window (the limit's period was shortened), by expiring it one
-- window from now. Denied calls consume nothing.
--
-- A key that is not a string (WRONGTYPE) or whose value is not a
-- non-negative decimal integer as INCRBY reads it (no sign, spaces,
-- fraction, exponent, hex or leading zero, at most 2^53 - 1) is an error,
-- and the call leaves every counter as it found it: the general path reads
-- and checks every counter before writing; the paths that count first take
-- back what they added.

-- The globals the common call reads, read once: each read of a global is
-- a table lookup, paid again at every use (about 120 instructions).
local KEYS, ARGV, redis = KEYS, ARGV, redis
local n = #KEYS
-- o: where the limits' arguments start (ARGV[o + 2i - 1], ARGV[o + 2i])
local o, cost, costarg, write = 0, 1, '1', true
if #ARGV ~= 2 * n then
  o, costarg = 2, ARGV[1]
  cost = tonumber(costarg)
  write = ARGV[2] == '0' and cost > 0
end

-- The common call, one limit that writes a cost that can fit, counts first
-- and asks questions after: INCR or INCRBY (which refuses a key that is not a
-- string or not an integer, before writing), the expiry only when the
-- counter is new or has none (or one beyond its window), and the count
-- taken back when it went over. Returns {count, reset_ms}: the count after
-- counting (over the rate: denied, and taken back), which the caller reads
-- against the rate and cost it sent; or, when it fits, the same as one
-- integer, reset_ms * (2 * rate + 1) + count.
local rate = n == 1 and write and ARGV[o + 1] + 0
if rate and cost <= rate then
  local key = KEYS[1]
  local c
  if o == 0 then
    c = redis.call('INCR', key)
  else
    c = redis.call('INCRBY', key, costarg)
  end
  if c < cost or c > 9007199254740991 then
    -- negative or beyond 2^53 - 1 before this call: not a counter
    redis.call('DECRBY', key, costarg)
    return redis.error_reply('ERR limiter corrupt counter: the key of limit 1 holds no counter')
  end
  local window = ARGV[o + 2] + 0
  local ttl = redis.call('PTTL', key)
  if ttl == 0 then
    -- the window's expiry millisecond, which Redis keeps the key through:
    -- the window is over, and this cost starts the next one
    redis.call('SET', key, costarg, 'PX', ARGV[o + 2])
    c = cost
    ttl = window
  else
    if c > rate then
      redis.call('DECRBY', key, costarg)
    end
    -- (the expiry last: Redis deletes a key at PEXPIRE when the new expiry
    -- is already past by its clock, which a window of a millisecond or two
    -- can be, and a command after it would find no key)
    if ttl < 0 or ttl > window then
      redis.call('PEXPIRE', key, ARGV[o + 2])
      ttl = window
    end
  end
  -- {c, ttl} as one integer when it fits below 2^52 (no table to build):
  -- reset_ms * (2 * rate + 1) + count, the count being at most the rate
  -- plus a cost the rate can fit
  local m = 2 * rate + 1
  local v = ttl * m + c
  if c < m and v < 4503599627370496 then
    return v
  end
  return {c, ttl}
end

-- Several limits that write a cost each can fit: the same, for each limit,
-- all or nothing. A counter INCRBY refuses, or one found negative or beyond
-- 2^53 - 1, takes back what this call added to the others (a counter it
-- created is deleted) and fails. Returns {count_1, reset_ms_1, count_2, ...}.
local fits = write
for i = 1, n do
  if not fits or cost > tonumber(ARGV[o - 1 + 2 * i]) then
    fits = false
    break
  end
end
if fits then
  -- fresh[i]: limit i's counter was in its expiry millisecond (PTTL 0),
  -- which belongs to the next window: its INCRBY is taken back at once,
  -- and an admission SETs the next window over it
  -- pttls[i]: limit i's PTTL read after its INCRBY (which keeps it)
  local counts, fresh, pttls = {}, {}, {}
  local function back(i)
    if fresh[i] then
      return
    end
    if counts[i] == cost then
      redis.call('DEL', KEYS[i])
    else
      redis.call('DECRBY', KEYS[i], costarg)
    end
  end
  local over = false
  for i = 1, n do
    local c = redis.pcall('INCRBY', KEYS[i], costarg)
    local bad = type(c) ~= 'number'
    if not bad and (c < cost or c > 9007199254740991) then
      redis.call('DECRBY', KEYS[i], costarg)
      bad = true
      c = redis.error_reply('ERR limiter corrupt counter: the key of limit ' .. i .. ' holds no counter')
    end
    if bad then
      for j = 1, i - 1 do
        back(j)
      end
      return c
    end
    if c > cost then
      pttls[i] = redis.call('PTTL', KEYS[i])
      if pttls[i] == 0 then
        redis.call('DECRBY', KEYS[i], costarg)
        fresh[i] = true
        c = cost
      end
    end
    counts[i] = c
    if c > tonumber(ARGV[o - 1 + 2 * i]) then
      over = true
    end
  end
  local out = {}
  for i = 1, n do
    local window = tonumber(ARGV[o + 2 * i])
    local ttl = window
    if fresh[i] then
      if not over then
        redis.call('SET', KEYS[i], costarg, 'PX', ARGV[o + 2 * i])
      end
    elseif over and counts[i] == cost then
      redis.call('DEL', KEYS[i]) -- created by this call: as if never counted
    else
      ttl = pttls[i] or redis.call('PTTL', KEYS[i])
      if over then
        redis.call('DECRBY', KEYS[i], costarg)
      end
      -- (the expiry last, as above)
      if ttl < 0 or ttl > window then
        redis.call('PEXPIRE', KEYS[i], window)
        ttl = window
      elseif ttl == 0 then
        ttl = 1 -- (a counter found at 0 in its expiry millisecond)
      end
    end
    out[2 * i - 1] = counts[i]
    out[2 * i] = ttl
  end
  return out
end

local counts, ttls, exists, repair = {}, {}, {}, {}
local allowed = 1

for i = 1, n do
  local rate = tonumber(ARGV[o - 1 + 2 * i])
  local window = tonumber(ARGV[o + 2 * i])
  local count = 0
  local ttl = window
  local v = redis.call('GET', KEYS[i])
  if v then
    if #v > 16 or not (v == '0' or string.match(v, '^[1-9]%d*$')) or tonumber(v) > 9007199254740991 then
      return redis.error_reply('ERR limiter corrupt counter: the key of limit ' .. i .. ' holds no counter')
    end
    count = tonumber(v)
    exists[i] = true
    ttl = redis.call('PTTL', KEYS[i])
    if ttl < 0 or ttl > window then
      -- a call that writes repairs it, expiring it one window from now; a
      -- call that writes nothing reports a window as long as it is (one
      -- without a TTL: as the next write will set it)
      if write or ttl < 0 then
        ttl = window
      end
      repair[i] = true
    elseif ttl == 0 then
      -- the window's expiry millisecond: over, as if gone (a write sets
      -- the next window over it)
      count = 0
      exists[i] = false
      ttl = window
    end
  end
  counts[i] = count
  ttls[i] = ttl
  if count + cost > rate then
    allowed = 0
  end
end

if allowed == 1 and write then
  for i = 1, n do
    if exists[i] then
      redis.call('INCRBY', KEYS[i], costarg)
    else
      redis.call('SET', KEYS[i], costarg, 'PX', ARGV[o + 2 * i])
    end
  end
end

-- (the expiry after the count, as above)
if write then
  for i = 1, n do
    if repair[i] then
      redis.call('PEXPIRE', KEYS[i], ARGV[o + 2 * i])
    end
  end
end

local out = {allowed}
for i = 1, n do
  local rate = tonumber(ARGV[o - 1 + 2 * i])
  local used = counts[i]
  if allowed == 1 and write then
    used = used + cost
  end
  local retry = 0
  if cost > rate then
    retry = -1
  elseif counts[i] + cost > rate then
    retry = ttls[i]
  end
  out[#out + 1] = rate - used
  out[#out + 1] = ttls[i]
  out[#out + 1] = retry
end
return out
