-- Fixed windows aligned to the Unix epoch, named by their period and
-- index, several limits decided at once, all or nothing. A counter counts
-- down from 2^52: it holds 2^52 - the count in its window, whatever the
-- rate.
--
-- KEYS[i]        counter of limit i in window b_i of period p_i: a name
--                ending in ":p_i:b_i" (decimals), the window
--                [b_i * p_i, (b_i + 1) * p_i) in Unix milliseconds (all
--                keys in one Cluster slot); the caller names the window
--                from its estimate of the server's clock
-- ARGV           nothing: a read;
--                {rate_1, ..., rate_n}: count a cost of 1;
--                {cost, rate_1, ..., rate_n}: count cost, 1 <= cost <=
--                every rate
--
-- The common call sends the fewest arguments: each one costs the server
-- about as much as a comparison does, and the window's bounds are needed
-- only when a counter is created or a call denied, so they are read from
-- the key then.
--
-- A counter holds 2^52 - count, the count being the cost admitted in its
-- window: it is created at 2^52 - cost and every admitted cost is taken
-- from it. The rate is not in it, so a rule whose rate changes keeps its
-- window's count. A rate and a cost are at most 2^50, so a counter holds
-- at least 2^51 as long as it exists (a key this script finds at 0 or
-- below was not written by it), and every number stays exact in Lua.
--
-- A read returns what the counters hold, 0 for a counter that does not
-- exist (the caller turns them into counts); or, when a counter does not
-- exist and the server's clock (TIME) is outside its window, {-1, seconds,
-- microseconds} as a counting call does: a counter that exists is in its
-- window, one that does not may be named from an estimate that was off.
--
-- A counting call: the common call (one limit, a counter that exists,
-- admitted) returns, as an integer, what the counter holds after taking
-- the cost (2^52 - the count). Every other call returns an array of the
-- counts after adding the cost {count_1, ..., count_n, ...}: admitted when
-- every count is within its rate; otherwise denied, and the cost was given
-- back to every limit:
--   - admitted, no counter created: the counts alone;
--   - admitted, a counter created: the call read the server's clock, and
--     the counts are followed by TIME's seconds and microseconds;
--   - denied: the counts are followed by the server's clock in Unix
--     milliseconds (read from a counter's TTL);
--   - {-1, seconds, microseconds}: the server's clock (TIME) is outside a
--     window this call would have created, or did create before another
--     limit denied it (the caller's estimate of the clock was off):
--     nothing is counted; the caller names the windows again from that
--     time.
--
-- Why one DECR is enough for the common call: a counter is created only by
-- a call that reads TIME and finds the server's clock in the counter's
-- window, and it expires at the window's end (PEXPIREAT, an absolute time,
-- set once). So a counter exists only during its own window by the
-- server's clock, and a call that finds it existing counts in the right
-- window without reading the clock, and checks its limit with one
-- comparison. The window never slides.
--
-- A counter that DECRBY refuses (not an integer, a key of another type), or
-- one found negative, is an error, and every counter is left as it was
-- found (a counter this call created is deleted). A counter found above
-- 2^52 (not written by this script; a count below zero) is an error too,
-- and left as it was. A counting call that is denied gives a
-- counter found without a TTL (a leak from elsewhere) its window's end
-- back; an admitted call does not look (it would cost a second command),
-- and a counter is never read after its window.

-- The globals the common call reads, read once: each read of a global is
-- a table lookup, paid again at every use (about 120 instructions).
local KEYS, ARGV = KEYS, ARGV
local n, m = #KEYS, #ARGV
local base = 4503599627370496 -- 2^52

-- The common calls first: one DECR (a cost of 1) or DECRBY and two
-- comparisons, nothing else made (no table, no closure). The counter was
-- found at most 2^52 (a count of 0 or more: first + cost <= 2^52, for a
-- cost of 1 first < 2^52) and the count after the cost is within the
-- rate: 2^52 - first <= rate (the cost and the rate read by the addition,
-- cheaper than tonumber; the sums stay below 2^53, exact). A counter
-- found above 2^52 takes the general path, which gives the cost back and
-- reports it.
local first
if n == 1 and m == 1 then
  first = redis.call('DECR', KEYS[1])
  if first < base and first + ARGV[1] >= base then
    return first
  end
elseif n == 1 and m == 2 then
  first = redis.call('DECRBY', KEYS[1], ARGV[1])
  if first + ARGV[1] <= base and first + ARGV[2] >= base then
    return first
  end
elseif m == 0 then
  local out, t = {}, nil
  for i = 1, n do
    local v = redis.call('GET', KEYS[i])
    -- a decimal integer as DECRBY reads it: no sign, no leading zero,
    -- at most 2^53 - 1
    if v and not (v == '0' or (#v <= 16 and string.match(v, '^[1-9]%d*$') and tonumber(v) <= 9007199254740991)) then
      return redis.error_reply('ERR limiter corrupt counter: the key of limit ' .. i .. ' holds no counter')
    end
    if not v then
      -- No counter: an unused window, or one the server's clock is not
      -- in (the caller's estimate was off), whose count says nothing.
      local p, b = string.match(KEYS[i], ':([1-9]%d*):(%d+)$')
      if not p then
        return redis.error_reply('ERR limiter aligned window: the key of limit ' .. i .. ' does not end in :period:index')
      end
      t = t or redis.call('TIME')
      local ms = t[1] * 1000 + math.floor(t[2] / 1000)
      p, b = tonumber(p), tonumber(b)
      if ms < b * p or ms >= (b + 1) * p then
        return {-1, t[1], t[2]}
      end
    end
    out[i] = tonumber(v or '0')
  end
  return out
elseif m ~= n and m ~= n + 1 then
  return redis.error_reply('ERR limiter aligned window: ' .. m .. ' arguments for ' .. n .. ' keys')
end

-- ARGV[off + i] is the rate of limit i; the cost as DECRBY reads it
local off = m - n
local costarg = '1'
if off == 1 then
  costarg = ARGV[1]
end
local cost = tonumber(costarg)

-- Every key names its window (this script's caller names its keys so),
-- checked before the other limits are counted; a cost already taken is
-- given back. The common calls above do not look: a counter that exists
-- was created by a call that got here.
for i = 1, n do
  if not string.match(KEYS[i], ':[1-9]%d*:%d+$') then
    if first == -cost then
      redis.call('DEL', KEYS[1])
    elseif first then
      redis.call('INCRBY', KEYS[1], costarg)
    end
    return redis.error_reply('ERR limiter aligned window: the key of limit ' .. i .. ' does not end in :period:index')
  end
end
if not first then
  first = redis.call('DECRBY', KEYS[1], costarg)
end

-- the window of limit i: its start and end, Unix milliseconds, from its
-- key
local function window(i)
  local p, b = string.match(KEYS[i], ':(%d+):(%d+)$')
  p, b = tonumber(p), tonumber(b)
  return b * p, (b + 1) * p
end

-- The server's clock, in Unix milliseconds, read from the TTL of limit i's
-- counter (which exists) at a denial: its window's end minus its PTTL. A
-- counter without a TTL (a leak from elsewhere) gets its window's end back
-- (an end already past deletes it), and the clock is read from TIME.
local function denied_at(i, stop)
  local ttl = redis.call('PTTL', KEYS[i])
  if ttl >= 0 then
    return stop - ttl
  end
  redis.call('PEXPIREAT', KEYS[i], string.format('%d', stop))
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end

-- Count limit by limit (the first was taken above), all or nothing.
local counts, created = {}, {}
local function back(upto)
  for j = 1, upto do
    if created[j] then
      redis.call('DEL', KEYS[j])
    else
      redis.call('INCRBY', KEYS[j], costarg)
    end
  end
end
local over, fresh = false, false
for i = 1, n do
  local v = first
  if i > 1 then
    v = redis.pcall('DECRBY', KEYS[i], costarg)
    if type(v) ~= 'number' then
      back(i - 1)
      return v
    end
  end
  local rate = tonumber(ARGV[off + i])
  if v == -cost then
    -- created by DECRBY (no counter, or one at 0)
    created[i], fresh = true, true
    counts[i] = cost
  else
    counts[i] = base - v
    if v < -cost or counts[i] < cost then
      redis.call('INCRBY', KEYS[i], costarg)
      back(i - 1)
      return redis.error_reply('ERR limiter corrupt counter: the key of limit ' .. i .. ' holds no counter')
    end
    if counts[i] > rate then
      over = true
    end
  end
end
-- The server's clock (TIME), and whether it is outside the window of a
-- counter this call created (the caller's estimate named another).
local function stale()
  local t = redis.call('TIME')
  local ms = t[1] * 1000 + math.floor(t[2] / 1000)
  for i = 1, n do
    if created[i] then
      local start, stop = window(i)
      if ms < start or ms >= stop then
        return t, true
      end
    end
  end
  return t, false
end
if over then
  back(n)
  if fresh then
    -- A denial that created counters read no clock: were they in the
    -- server's windows? If not, its counts (0 for those limits) were
    -- another window's, and the call goes again for the server's.
    local t, off = stale()
    if off then
      return {-1, t[1], t[2]}
    end
  end
  local now
  for i = 1, n do
    if not created[i] then
      local _, stop = window(i)
      local at = denied_at(i, stop)
      now = now or at
    end
  end
  counts[n + 1] = now
  return counts
end
if fresh then
  -- Counters created by this call: is the server's clock in their windows?
  local t, off = stale()
  if off then
    back(n)
    return {-1, t[1], t[2]}
  end
  for i = 1, n do
    if created[i] then
      local _, stop = window(i)
      redis.call('INCRBY', KEYS[i], '4503599627370496') -- base, as a string
      redis.call('PEXPIREAT', KEYS[i], string.format('%d', stop))
    end
  end
  counts[n + 1] = t[1]
  counts[n + 2] = t[2]
end
return counts
