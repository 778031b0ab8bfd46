-- Several requests decided in one call, each as sliding_log.lua
-- decides it on its own: the code of sliding_log.lua, verbatim, is
-- the function decide below, run for each request in turn. (This file
-- is generated from that script: go test ./strategy -run
-- TestManyScripts -update.)
--
-- KEYS           the requests' keys, one request's after another's
-- ARGV           for each request in turn: its number of keys, its number
--                of arguments, then its arguments as sliding_log.lua
--                reads them; or its number of keys and -1, when its
--                arguments are those of the request before it (sent once)
--
-- Returns one element per request: sliding_log.lua's reply to it,
-- or the error it ends with (as an error reply in the array). A
-- request's error leaves what it wrote, as the script alone does, and the
-- requests after it are decided.

local function decide(KEYS, ARGV)
local KEYS, ARGV, redis, string, tonumber = KEYS, ARGV, redis, string, tonumber
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cost = tonumber(ARGV[1])
local write = ARGV[2] == '0' and cost > 0
local n = #KEYS

local counts, allowed = {}, 1
-- the newest unit's score of each log, where a denial read it
local newest = {}
-- Every key is read before anything is written: a ZCOUNT that refuses a
-- key of another type ends the call with nothing written.
for i = 1, n do
  local rate = tonumber(ARGV[2 + 2 * i])
  local window = tonumber(ARGV[3 + 2 * i]) * 1000
  -- units still in the window: scored after now - window (whole
  -- microseconds, 16 digits: formatted as integers, never concatenated,
  -- which would round them to 14 digits, and not passed as numbers, which
  -- Redis 7.0 formats as doubles at a higher cost)
  local c = redis.pcall('ZCOUNT', KEYS[i], string.format('%d', now - window + 1), '+inf')
  if type(c) == 'table' then
    if string.find(c.err or '', 'WRONGTYPE', 1, true) then
      return redis.error_reply('ERR limiter corrupt counter: the key of limit ' .. i .. ' holds no sliding log')
    end
    return c
  end
  counts[i] = c
  if counts[i] + cost > rate then
    allowed = 0
  end
end

-- ZADD comes first: a script's first write is where Redis refuses it
-- under maxmemory (OOM), and after any write it would not refuse the rest.
if write and allowed == 1 then
  local nows = string.format('%d', now)
  for i = 1, n do
    local j = 0
    while j < cost do
      local batch = {}
      for k = j + 1, math.min(j + 500, cost) do
        batch[#batch + 1] = nows
        batch[#batch + 1] = ARGV[3] .. ':' .. k
      end
      redis.call('ZADD', KEYS[i], unpack(batch))
      j = j + 500
    end
  end
end

-- The reply is read before any expiry is set: Redis deletes a key at
-- PEXPIRE when the new expiry is already past by its clock (a window of a
-- millisecond or two can be), and a read after it would find no log.
local out = {allowed}
for i = 1, n do
  local rate = tonumber(ARGV[2 + 2 * i])
  local window = tonumber(ARGV[3 + 2 * i]) * 1000
  local used = counts[i]
  if allowed == 1 and write then
    used = used + cost
  end
  local retry = 0
  if cost > rate then
    retry = -1
  elseif counts[i] + cost > rate then
    -- the unit whose leaving makes room: the (counts + cost - rate)-th
    -- oldest of the window
    local first = counts[i] + cost - rate
    local m = redis.call('ZRANGEBYSCORE', KEYS[i], string.format('%d', now - window + 1), '+inf', 'WITHSCORES', 'LIMIT', first - 1, 1)
    retry = math.max(1, math.floor((tonumber(m[2]) + window - now + 999) / 1000))
  end
  -- the log is empty one window after its newest unit: read from the
  -- unit's score, in microseconds (the key's PTTL, in whole milliseconds
  -- from the millisecond the unit came in, reads up to 1 ms short)
  local reset = 0
  if allowed == 1 and write then
    reset = window / 1000
  elseif used > 0 then
    local s = newest[i] or tonumber(redis.call('ZRANGE', KEYS[i], -1, -1, 'WITHSCORES')[2])
    newest[i] = s
    reset = math.max(1, math.floor((s + window - now + 999) / 1000))
  end
  out[#out + 1] = rate - used
  out[#out + 1] = reset
  out[#out + 1] = retry
end

if write then
  for i = 1, n do
    local window = tonumber(ARGV[3 + 2 * i])
    local added = 0
    if allowed == 1 then
      added = cost
    end
    if redis.call('ZCARD', KEYS[i]) > counts[i] + added then
      redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', string.format('%d', now - window * 1000))
    end
    if allowed == 1 then
      redis.call('PEXPIRE', KEYS[i], ARGV[3 + 2 * i])
    else
      -- a denial adds nothing, but a log found without its expiry, or
      -- with one longer than its window, gets it back; one that would
      -- expire before its newest unit leaves the window (a limit whose
      -- period was lengthened) keeps its units that long
      local ttl = redis.call('PTTL', KEYS[i])
      if ttl == -1 or ttl > window then
        redis.call('PEXPIRE', KEYS[i], ARGV[3 + 2 * i])
      elseif counts[i] > 0 then
        newest[i] = newest[i] or tonumber(redis.call('ZRANGE', KEYS[i], -1, -1, 'WITHSCORES')[2])
        local need = math.floor((newest[i] + window * 1000 - now + 999) / 1000)
        if ttl < need then
          redis.call('PEXPIRE', KEYS[i], need)
        end
      end
    end
  end
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
