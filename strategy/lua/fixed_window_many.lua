-- Several requests decided in one call, each as fixed_window.lua
-- decides it on its own: the code of fixed_window.lua, verbatim, is
-- the function decide below, run for each request in turn. (This file
-- is generated from that script: go test ./strategy -run
-- TestManyScripts -update.)
--
-- KEYS           the requests' keys, one request's after another's
-- ARGV           for each request in turn: its number of keys, its number
--                of arguments, then its arguments as fixed_window.lua
--                reads them; or its number of keys and -1, when its
--                arguments are those of the request before it (sent once)
--
-- Returns one element per request: fixed_window.lua's reply to it,
-- or the error it ends with (as an error reply in the array). A
-- request's error leaves what it wrote, as the script alone does, and the
-- requests after it are decided.

local function decide(KEYS, ARGV)
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
