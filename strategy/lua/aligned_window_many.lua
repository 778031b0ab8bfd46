-- Several requests decided in one call, each as aligned_window.lua
-- decides it on its own: the code of aligned_window.lua, verbatim, is
-- the function decide below, run for each request in turn. (This file
-- is generated from that script: go test ./strategy -run
-- TestManyScripts -update.)
--
-- KEYS           the requests' keys, one request's after another's
-- ARGV           for each request in turn: its number of keys, its number
--                of arguments, then its arguments as aligned_window.lua
--                reads them; or its number of keys and -1, when its
--                arguments are those of the request before it (sent once)
--
-- Returns one element per request: aligned_window.lua's reply to it,
-- or the error it ends with (as an error reply in the array). A
-- request's error leaves what it wrote, as the script alone does, and the
-- requests after it are decided.
--
-- A request answered "another window" ({-1, seconds, microseconds}: the
-- caller's estimate of the clock named another window, and nothing was
-- counted) goes again, named anew, in a later call: every later request
-- that names one of its keys, or of the keys of a request answered so
-- after it, is answered so too (the same reply), uncounted, so that the
-- requests of one subject are decided in their order.

local function decide(KEYS, ARGV)
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
end

-- The tables decide reads as KEYS and ARGV are reused from request to
-- request (cut to the request's length; decide never writes to them), and
-- the counts are read by an addition, cheaper than tonumber: this loop's
-- cost is paid per request.
local keys, argv, out = KEYS, ARGV, {}
local k, a, n, j = 0, 1, #ARGV, 0
local ks, as, kn, an = {}, {}, 0, 0
-- the reply of a request answered "another window", and the keys of the
-- requests answered so
local moved, again = false, {}
local function names_again(ks, nk)
  for i = 1, nk do
    if again[ks[i]] then
      return true
    end
  end
  return false
end
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
  local ok, r
  if moved and names_again(ks, nk) then
    ok, r = true, moved
  else
    ok, r = pcall(decide, ks, as)
  end
  if ok and type(r) == 'table' and r[1] == -1 then
    moved = r
    for i = 1, nk do
      again[ks[i]] = true
    end
  end
  if not ok and type(r) ~= 'table' then
    r = {err = tostring(r)} -- a Lua error, not a Redis one
  elseif r == nil then
    r = false -- a nil reply, kept in its place
  end
  j = j + 1
  out[j] = r
end
return out
