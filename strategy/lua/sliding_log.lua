-- Sliding log: every admitted unit of cost is a member of a sorted set
-- scored by its time; a limit admits when the units of the last window
-- plus the cost fit its rate. Several limits decided at once, all or
-- nothing, on the server's clock.
--
-- KEYS[i]        log of limit i (all keys in one Cluster slot): a sorted set
--                of members "<nonce>:<j>" scored by microseconds since the
--                Unix epoch
-- ARGV[1]        cost, >= 0
-- ARGV[2]        "1": decide but write nothing (peek); "0": decide and write
-- ARGV[3]        nonce, unique per call (the members of one instant differ)
-- ARGV[2+2i]     rate of limit i
-- ARGV[3+2i]     window of limit i, in milliseconds
--
-- Returns {allowed, remaining_1, reset_ms_1, retry_ms_1, remaining_2, ...}:
-- allowed is 1 or 0 (for a peek: whether the cost would be admitted);
-- remaining is after the decision; reset_ms is the time until the log is
-- empty (0 when it is); retry_ms is 0 for a limit that admits, -1 when the
-- cost can never fit (cost > rate), else the wait until enough of the
-- oldest units have left the window (at least 1).
--
-- Every key's type is checked before anything is written: a key that is
-- not a sorted set is an error, and the call writes nothing. A writing call
-- trims what left the window and leaves each log expiring one window after
-- its newest member, so an idle subject leaves nothing behind.
-- (Redis 5 and later replicate a script's effects, so writing after TIME
-- needs no redis.replicate_commands.)

-- The globals every call reads, read once: each read of a global is a
-- table lookup, paid again at every use (about 120 instructions).
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
